"""Fixtures for tests of gpu-admission itself on the control plane.

`admission` starts the real service once per session and registers it;
`opted_in` and `plain_namespace` give each test a namespace of its own, with
and without the opt-in label, deleted afterwards so that bound pods free
their GPUs for the next test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .controlplane import ControlPlane
from .nodes import NodeSpec
from .webhook_server import WebhookServer

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
OPT_IN = {"gpu-admission.io/enabled": "true"}


def example(name: str) -> str:
    return (EXAMPLES / name).read_text("utf-8")


@pytest.fixture(scope="session")
def admission(
    controlplane: ControlPlane,
    gpu_fleet: list[NodeSpec],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WebhookServer]:
    """gpu-admission serving the default policy, registered with the apiserver."""
    server = WebhookServer(tmp_path_factory.mktemp("gpu-admission"))
    controlplane.apply((REPO / "deploy" / "base" / "priorityclasses.yaml").read_text("utf-8"))
    server.start()
    server.register(controlplane.kubeconfig)
    try:
        yield server
    finally:
        server.stop()


def namespace_name(request: pytest.FixtureRequest, prefix: str) -> str:
    test = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    return f"{prefix}-{test}"[:63].rstrip("-")


@pytest.fixture
def opted_in(
    controlplane: ControlPlane, admission: WebhookServer, request: pytest.FixtureRequest
) -> Iterator[str]:
    name = controlplane.create_namespace(namespace_name(request, "in"), OPT_IN)
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


@pytest.fixture
def plain_namespace(
    controlplane: ControlPlane, admission: WebhookServer, request: pytest.FixtureRequest
) -> Iterator[str]:
    name = controlplane.create_namespace(namespace_name(request, "out"))
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


def class_pod(name: str, label: str, gpus: int = 1) -> dict[str, Any]:
    """A pod of the `inference` class under the workload label `label`, asking `gpus`."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {label: "inference"}},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ]
        },
    }
