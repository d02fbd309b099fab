"""The benchmark's cluster: etcd and kube-apiserver only, and a thin admin REST client.

Pod CREATE throughput needs neither kube-scheduler nor kube-controller-manager, and
both would add load of their own to the apiserver while it is measured: the scheduler
watches every new pod and writes its status back (there are no nodes to bind it to),
the controller-manager's informers watch pods too. So ``apiserver_only`` starts the
harness's first two components and stops there. Without the controller-manager two
things are done by hand: the ``default`` ServiceAccount of each namespace (the
ServiceAccount admission plugin refuses pods without it) is created here, and
namespaces are never deleted (nothing would finalize them); their pods are, which
needs no kubelet since they are never bound.

``Api`` speaks JSON to kube-apiserver over one kept-alive HTTPS connection with the
admin client certificate, for everything outside the measured windows.
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import orjson

from tests.e2e.controlplane import ControlPlane

T = TypeVar("T")


def apiserver_only(bin_dir: Path, work_dir: Path, flags: tuple[str, ...] = ()) -> ControlPlane:
    """The harness's control plane without kube-scheduler and kube-controller-manager."""
    return ControlPlane(bin_dir, work_dir, controllers=False, extra_apiserver_flags=flags)


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        super().__init__(f"{method} {path}: {status} {body[:2000].decode(errors='replace')}")
        self.status = status
        self.body = body


class Api:
    """JSON over one kept-alive HTTPS connection to kube-apiserver, as cluster admin."""

    def __init__(self, api_url: str, context: ssl.SSLContext, timeout: float = 60.0) -> None:
        parsed = urllib.parse.urlsplit(api_url)
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or 443
        self.context, self.timeout = context, timeout
        self._connection: http.client.HTTPSConnection | None = None

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.host, self.port, context=self.context, timeout=self.timeout
        )

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, bytes]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            if self._connection is None:
                self._connection = self.connection()
            try:
                self._connection.request(method, path, body=body, headers=headers)
                response = self._connection.getresponse()
                return response.status, response.read()
            except (http.client.HTTPException, OSError):
                self._connection.close()
                self._connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def call(
        self,
        method: str,
        path: str,
        obj: Any = None,
        *,
        ok: tuple[int, ...] = (200, 201, 202),
        content_type: str = "application/json",
    ) -> Any:
        body = None if obj is None else orjson.dumps(obj)
        status, data = self.raw(method, path, body, content_type)
        if status not in ok:
            raise ApiError(method, path, status, data)
        return orjson.loads(data) if data else None

    def text(self, path: str) -> str:
        status, data = self.raw("GET", path)
        if status != 200:
            raise ApiError("GET", path, status, data)
        return data.decode()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- what the benchmark does with it -----------------------------------

    def create_namespace(self, name: str, labels: dict[str, str]) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        namespace["metadata"]["labels"] = labels  # type: ignore[index]
        self.call("POST", "/api/v1/namespaces", namespace, ok=(201, 409))
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        self.call("POST", f"/api/v1/namespaces/{name}/serviceaccounts", account, ok=(201, 409))

    def pod_names(self, namespace: str) -> list[str]:
        listed = self.call("GET", f"/api/v1/namespaces/{namespace}/pods")
        return [item["metadata"]["name"] for item in listed["items"]]

    def delete_pods(self, namespace: str, timeout: float = 120.0) -> int:
        """Delete every pod of ``namespace`` and wait until none is left; how many there were."""
        count = len(self.pod_names(namespace))
        self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods")
        wait_until(lambda: not self.pod_names(namespace), timeout, f"pods of {namespace} gone")
        return count

    def apply(self, obj: dict[str, Any]) -> None:
        """Create ``obj`` or replace it (a cluster-scoped admissionregistration object)."""
        path = collection_path(obj)
        name = obj["metadata"]["name"]
        status, data = self.raw("GET", f"{path}/{name}")
        if status == 404:
            self.call("POST", path, obj, ok=(201,))
            return
        if status != 200:
            raise ApiError("GET", f"{path}/{name}", status, data)
        current = orjson.loads(data)
        replaced = {**obj, "metadata": {**obj["metadata"]}}
        replaced["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        self.call("PUT", f"{path}/{name}", replaced)

    def delete(self, obj: dict[str, Any]) -> None:
        self.call("DELETE", f"{collection_path(obj)}/{obj['metadata']['name']}", ok=(200, 202, 404))

    def dry_run_pod(self, namespace: str, pod: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Create ``pod`` with ``dryRun=All``: admission runs in full, nothing is stored."""
        path = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"
        status, data = self.raw("POST", path, orjson.dumps(pod))
        return status, orjson.loads(data)


PLURALS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    "MutatingAdmissionPolicy": "mutatingadmissionpolicies",
    "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
    "ValidatingAdmissionPolicy": "validatingadmissionpolicies",
    "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
    "PriorityClass": "priorityclasses",
    "DeviceClass": "deviceclasses",
}


def collection_path(obj: dict[str, Any]) -> str:
    return f"/apis/{obj['apiVersion']}/{PLURALS[obj['kind']]}"


def wait_until(predicate: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:g}s: {what}")
        time.sleep(interval)
