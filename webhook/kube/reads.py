"""One namespaced object read as plain JSON, the way admission requests carry objects.

Through the generic ``/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}``
path: the caller knows the plural, so no discovery round trip while a review waits. A
404 (the object, or its kind, is not there) is an answer, not an error. Given
``max_bytes``, no more of the answer is read than that: a larger object raises
``ObjectTooLarge`` (kube-apiserver stores objects of up to about 1.5 MiB, and a review
that reads dozens of them must not hold them all).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import client

from webhook.errors import GpuAdmissionError
from webhook.kube.api_errors import NOT_FOUND, ApiException

__all__ = ["ObjectTooLarge", "read_core", "read_namespaced"]


class ObjectTooLarge(GpuAdmissionError):
    """The object's JSON is larger than the reader takes."""


def read_namespaced(
    api: Any,
    group: str,
    version: str,
    namespace: str,
    plural: str,
    name: str,
    *,
    timeout: float,
    max_bytes: int | None = None,
) -> dict[str, Any] | None:
    """The object as a JSON dict; None when it does not exist or its kind is not served
    (404). Other API errors, and timeouts, raise; so does an object over `max_bytes`
    (ObjectTooLarge)."""
    objects: Any = client.CustomObjectsApi(api)
    return _read(
        lambda: objects.get_namespaced_custom_object(
            group,
            version,
            namespace,
            plural,
            name,
            _request_timeout=timeout,
            _preload_content=False,
        ),
        plural,
        name,
        max_bytes,
    )


def read_core(
    api: Any,
    namespace: str,
    plural: str,
    name: str,
    *,
    timeout: float,
    max_bytes: int | None = None,
) -> dict[str, Any] | None:
    """A pod, ConfigMap or Secret (``/api/v1``, `plural` naming which), as
    ``read_namespaced`` reads others."""
    core: Any = client.CoreV1Api(api)
    reads = {
        "pods": core.read_namespaced_pod,
        "configmaps": core.read_namespaced_config_map,
        "secrets": core.read_namespaced_secret,
    }
    return _read(
        lambda: reads[plural](name, namespace, _request_timeout=timeout, _preload_content=False),
        plural,
        name,
        max_bytes,
    )


def _read(
    call: Callable[[], Any], plural: str, name: str, max_bytes: int | None
) -> dict[str, Any] | None:
    try:
        response = call()
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    try:
        body = response.data if max_bytes is None else response.read(max_bytes + 1)
        if max_bytes is not None and len(body) > max_bytes:
            response.drain_conn()
            raise ObjectTooLarge(f"{plural} {name!r} is over {max_bytes // 1024} KiB")
    finally:
        response.release_conn()
    found = orjson.loads(body)
    return found if isinstance(found, dict) else None
