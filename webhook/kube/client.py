"""The only module that talks to the Kubernetes API.

Uses the official `kubernetes` client. Objects are plain dicts rendered by
webhook_config; this module only creates or replaces them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException as ApiException
from kubernetes.dynamic import DynamicClient

CONFLICT = 409
NOT_FOUND = 404


def api_client(kubeconfig: Path | None = None) -> Any:
    """A client from a kubeconfig file, or the in-cluster service account."""
    if kubeconfig is not None:
        return config.new_client_from_config(config_file=str(kubeconfig))
    config.load_incluster_config()
    return client.ApiClient()


def apply_webhook_configurations(
    api: Any, mutating: dict[str, Any], validating: dict[str, Any]
) -> None:
    """Create both configurations, or replace them where they exist."""
    admission = client.AdmissionregistrationV1Api(api)
    _create_or_replace(
        mutating,
        admission.create_mutating_webhook_configuration,
        admission.read_mutating_webhook_configuration,
        admission.replace_mutating_webhook_configuration,
    )
    _create_or_replace(
        validating,
        admission.create_validating_webhook_configuration,
        admission.read_validating_webhook_configuration,
        admission.replace_validating_webhook_configuration,
    )


def delete_webhook_configurations(api: Any, name: str) -> None:
    """Remove both configurations (mutating first); absent ones are fine."""
    admission = client.AdmissionregistrationV1Api(api)
    for delete in (
        admission.delete_mutating_webhook_configuration,
        admission.delete_validating_webhook_configuration,
    ):
        try:
            delete(name)
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise


def _create_or_replace(body: dict[str, Any], create: Any, read: Any, replace: Any) -> None:
    name = body["metadata"]["name"]
    try:
        create(body)
    except ApiException as error:
        if error.status != CONFLICT:
            raise
        current = read(name)
        updated = dict(body, metadata=dict(body["metadata"]))
        updated["metadata"]["resourceVersion"] = current.metadata.resource_version
        replace(name, updated)


FIELD_MANAGER = "gpu-admission"


def server_side_apply(api: Any, objects: list[dict[str, Any]]) -> list[str]:
    """Apply each object in order with server-side apply; return 'Kind/name' of each."""
    dynamic = DynamicClient(api)
    applied = []
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        metadata = obj["metadata"]
        dynamic.server_side_apply(
            resource,
            body=obj,
            name=metadata["name"],
            namespace=metadata.get("namespace"),
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
        )
        applied.append(f"{obj['kind']}/{metadata['name']}")
    return applied


def delete_objects(api: Any, objects: list[dict[str, Any]]) -> list[str]:
    """Delete each object in order; absent ones are fine. Return those deleted."""
    dynamic = DynamicClient(api)
    deleted = []
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        metadata = obj["metadata"]
        try:
            resource.delete(name=metadata["name"], namespace=metadata.get("namespace"))
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise
            continue
        deleted.append(f"{obj['kind']}/{metadata['name']}")
    return deleted


def deployment_availability(api: Any, namespace: str, name: str) -> tuple[int, int]:
    """(available replicas, desired replicas) of a Deployment."""
    deployment = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    available = deployment.status.available_replicas if deployment.status else None
    return (available or 0, deployment.spec.replicas or 0)


def api_error_message(error: ApiException) -> str:
    """The apiserver's own message from a failed call, e.g. 'namespace ... is being terminated'."""
    try:
        body = json.loads(error.body or "{}")
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return f"{error.status} {error.reason}: {message or error.body}"
