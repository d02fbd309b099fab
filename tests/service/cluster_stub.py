"""A stand-in for kube-apiserver over plain HTTP on 127.0.0.1, answering plain dicts.

It serves the Namespaces it is given (with their labels, selected by ``labelSelector``
``key=value`` as kube-apiserver does), no API group beyond the built-in ones, an empty
list for every other collection, and 404 for PolicyReports (no CRD). Enough for an
audit to choose its namespaces and list nothing; tests/e2e audits a real cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client

from tests.json_server import json_server

__all__ = ["ClusterStub", "cluster_stub"]

VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.0",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2026-12-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class ClusterStub:
    def __init__(self, namespaces: Mapping[str, Mapping[str, str]]) -> None:
        self.namespaces = {name: dict(labels) for name, labels in namespaces.items()}
        self.paths: list[str] = []
        self.url = ""

    def api(self) -> Any:
        return client.ApiClient(client.Configuration(host=self.url))

    def kubeconfig(self, directory: Path) -> Path:
        path = directory / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "stub", "cluster": {"server": self.url}}],
                    "users": [{"name": "stub", "user": {"token": "t"}}],
                    "contexts": [{"name": "stub", "context": {"cluster": "stub", "user": "stub"}}],
                    "current-context": "stub",
                }
            ),
            "utf-8",
        )
        return path

    def answer(self, path: str, query: Mapping[str, list[str]]) -> tuple[int, dict[str, Any]]:
        path = path.rstrip("/")
        if path == "/version":
            return 200, VERSION
        if path == "/apis":
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []}
        if path.startswith("/apis/wgpolicyk8s.io/"):
            return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404}
        if path == "/api/v1/namespaces":
            return 200, self._namespaces(query.get("labelSelector", [""])[0])
        return 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}

    def _namespaces(self, selector: str) -> dict[str, Any]:
        key, _, value = selector.partition("=")
        items = [
            {"metadata": {"name": name, "labels": labels}}
            for name, labels in self.namespaces.items()
            if not selector or labels.get(key) == value
        ]
        return {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {}, "items": items}


@contextmanager
def cluster_stub(namespaces: Mapping[str, Mapping[str, str]]) -> Iterator[ClusterStub]:
    stub = ClusterStub(namespaces)

    def answer(path: str) -> tuple[int, Any]:
        url = urlsplit(path)
        stub.paths.append(url.path)
        return stub.answer(url.path, parse_qs(url.query))

    with json_server(answer) as url:
        stub.url = url
        yield stub
