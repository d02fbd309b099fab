"""Where kube-apiserver is, as the cluster says: the addresses of the ``kubernetes``
Service's EndpointSlice in ``default``, which kube-apiserver keeps itself (one address
per serving replica, its advertise address).

Read with ``get`` of that one object by name; a cluster without it (404) lists none.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from webhook.kube.api_errors import NOT_FOUND, ApiException

__all__ = ["TIMEOUT_SECONDS", "apiserver_addresses"]

TIMEOUT_SECONDS = 5.0

SERVICE = "kubernetes"
NAMESPACE = "default"


def apiserver_addresses(api: Any, *, timeout: float = TIMEOUT_SECONDS) -> list[str]:
    """kube-apiserver's addresses as its EndpointSlice lists them; none when there is no
    such EndpointSlice. Other API errors, and timeouts, raise."""
    discovery: Any = client.DiscoveryV1Api(api)
    try:
        found = discovery.read_namespaced_endpoint_slice(
            SERVICE, NAMESPACE, _request_timeout=timeout
        )
    except ApiException as error:
        if error.status == NOT_FOUND:
            return []
        raise
    return [
        address
        for endpoint in found.endpoints or ()
        for address in endpoint.addresses or ()
        if isinstance(address, str)
    ]
