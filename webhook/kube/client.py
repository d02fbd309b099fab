"""The client and what the commands apply and delete with it.

Credentials are found as kubectl finds them (``webhook.kube.credentials``). Objects
are plain dicts rendered by the install wing; this module applies them (server-side
apply, or a whole replacement of the webhook configurations through
``webhook.kube.writes``), deletes them, and reads a Deployment's availability. Failed
calls raise ``ApiException``; ``webhook.kube.api_errors`` turns one into a message.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from webhook.kube.api_errors import NOT_FOUND, ApiException
from webhook.kube.credentials import resolve_credentials
from webhook.kube.writes import create_or_replace

__all__ = [
    "DRY_RUN_ALL",
    "FIELD_MANAGER",
    "REACHABLE_TIMEOUT",
    "api_client",
    "apply_webhook_configurations",
    "check_reachable",
    "delete_objects",
    "delete_webhook_configurations",
    "deployment_availability",
    "object_exists",
    "server_dry_run",
    "server_side_apply",
]

FIELD_MANAGER = "gpu-admission"
DRY_RUN_ALL = "All"
"""kube-apiserver's ``dryRun`` value: every stage of a write runs but the last, storage."""


REACHABLE_TIMEOUT = (5.0, 15.0)
"""(connect, read) seconds of ``check_reachable``: a server that does not answer is
reported in seconds, not after the system's TCP timeout of minutes."""


def api_client(kubeconfig: Path | None = None, context: str | None = None) -> Any:
    """A ``kubernetes.client.ApiClient`` with the credentials kubectl would use:
    ``kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``, else the in-cluster
    service account; ``context`` instead of the current one. Raises
    ``webhook.kube.credentials.CredentialsError`` (one line) when none can be used.
    Nothing is sent until the first call."""
    return client.ApiClient(configuration=resolve_credentials(kubeconfig, context).configuration)


def check_reachable(api: Any) -> None:
    """Ask the server its version, within ``REACHABLE_TIMEOUT``: an unreachable server,
    a TLS failure or refused credentials (401) raise here, before any change is made."""
    client.VersionApi(api).get_code(_request_timeout=REACHABLE_TIMEOUT)


def apply_webhook_configurations(
    api: Any, mutating: dict[str, Any], validating: dict[str, Any], *, dry_run: bool = False
) -> None:
    """Create both configurations, or replace them whole where they exist; with
    ``dry_run``, kube-apiserver checks and admits the writes but stores nothing."""
    admission = client.AdmissionregistrationV1Api(api)
    mode = DRY_RUN_ALL if dry_run else None
    create_or_replace(
        mutating,
        read=admission.read_mutating_webhook_configuration,
        create=partial(admission.create_mutating_webhook_configuration, dry_run=mode),
        replace=partial(admission.replace_mutating_webhook_configuration, dry_run=mode),
    )
    create_or_replace(
        validating,
        read=admission.read_validating_webhook_configuration,
        create=partial(admission.create_validating_webhook_configuration, dry_run=mode),
        replace=partial(admission.replace_validating_webhook_configuration, dry_run=mode),
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


def server_dry_run(api: Any, objects: list[dict[str, Any]]) -> list[str]:
    """Server-side apply each object with ``dryRun=All``: kube-apiserver validates,
    defaults and admits it (webhooks included) and stores nothing. Return
    'Kind/name created|configured|unchanged' for each, as ``kubectl apply`` says it."""
    dynamic = DynamicClient(api)
    outcomes = []
    for obj in objects:
        resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        metadata = obj["metadata"]
        where = {"name": metadata["name"], "namespace": metadata.get("namespace")}
        try:
            before = resource.get(**where).to_dict()
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise
            before = None
        after = dynamic.server_side_apply(
            resource,
            body=obj,
            field_manager=FIELD_MANAGER,
            force_conflicts=True,
            dry_run=DRY_RUN_ALL,
            **where,
        ).to_dict()
        if before is None:
            outcome = "created"
        elif _content(before) == _content(after):
            outcome = "unchanged"
        else:
            outcome = "configured"
        outcomes.append(f"{obj['kind']}/{metadata['name']} {outcome}")
    return outcomes


def object_exists(api: Any, api_version: str, kind: str, name: str) -> bool:
    """Whether a cluster-scoped object exists (a Namespace, say)."""
    resource = DynamicClient(api).resources.get(api_version=api_version, kind=kind)
    try:
        resource.get(name=name)
    except ApiException as error:
        if error.status == NOT_FOUND:
            return False
        raise
    return True


def _content(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without what every write changes (who wrote which field, the version)."""
    metadata = {
        key: value
        for key, value in obj.get("metadata", {}).items()
        if key not in {"managedFields", "resourceVersion"}
    }
    return dict(obj, metadata=metadata)


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


def labelled_objects(
    api: Any, api_version: str, kind: str, labels: dict[str, str]
) -> list[dict[str, Any]]:
    """The cluster-scoped objects of one kind carrying every label of `labels`, each as
    apiVersion, kind and name (what ``delete_objects`` needs)."""
    resource = DynamicClient(api).resources.get(api_version=api_version, kind=kind)
    selector = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
    found = resource.get(label_selector=selector).to_dict().get("items", [])
    return [
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": o["metadata"]["name"]}}
        for o in found
    ]


def deployment_availability(api: Any, namespace: str, name: str) -> tuple[int, int]:
    """(available replicas, desired replicas) of a Deployment."""
    deployment = client.AppsV1Api(api).read_namespaced_deployment(name, namespace)
    available = deployment.status.available_replicas if deployment.status else None
    return (available or 0, deployment.spec.replicas or 0)
