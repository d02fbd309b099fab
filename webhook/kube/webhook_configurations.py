"""The live Mutating- and ValidatingWebhookConfiguration of a name, read as plain JSON.

A running replica compares them with the policy it serves
(``webhook.service.webhook_scope``): its identity may ``get`` them by that name only,
never list nor write them (deploy/base/rbac.yaml says why). A configuration that does
not exist (404) is an answer, None; every other failure raises.
"""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes import client

from webhook.kube.api_errors import NOT_FOUND, ApiException

__all__ = ["read_webhook_configurations"]

GROUP = "admissionregistration.k8s.io"
VERSION = "v1"
PLURALS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")


def read_webhook_configurations(
    api: Any, name: str, *, timeout: float
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The (mutating, validating) configurations named `name`, None for one not there."""
    mutating, validating = (_read(api, plural, name, timeout) for plural in PLURALS)
    return mutating, validating


def _read(api: Any, plural: str, name: str, timeout: float) -> dict[str, Any] | None:
    objects: Any = client.CustomObjectsApi(api)
    try:
        response = objects.get_cluster_custom_object(
            GROUP, VERSION, plural, name, _request_timeout=timeout, _preload_content=False
        )
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    try:
        found = orjson.loads(response.data)
    finally:
        response.release_conn()
    return found if isinstance(found, dict) else None
