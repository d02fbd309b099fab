"""One namespaced object read as plain JSON, the way admission requests carry objects.

Through the generic ``/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}``
path: the caller knows the plural, so no discovery round trip while a review waits. A
404 (the object, or its kind, is not there) is an answer, not an error.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from webhook.kube.api_errors import NOT_FOUND, ApiException

__all__ = ["read_namespaced"]


def read_namespaced(
    api: Any, group: str, version: str, namespace: str, plural: str, name: str, *, timeout: float
) -> dict[str, Any] | None:
    """The object as a JSON dict; None when it does not exist or its kind is not served
    (404). Other API errors, and timeouts, raise."""
    objects: Any = client.CustomObjectsApi(api)
    try:
        found = objects.get_namespaced_custom_object(
            group, version, namespace, plural, name, _request_timeout=timeout
        )
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    return found if isinstance(found, dict) else None
