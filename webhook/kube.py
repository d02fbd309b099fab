"""The only module that talks to the Kubernetes API.

Uses the official `kubernetes` client. Objects are plain dicts rendered by
webhook_config; this module only creates or replaces them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

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
