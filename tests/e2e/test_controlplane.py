"""The e2e harness works: a real apiserver, controller-manager and scheduler."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from .build_controlplane import pinned_kubernetes_version
from .controlplane import ControlPlane
from .nodes import NodeSpec, nodes_in_pool

pytestmark = pytest.mark.e2e


@pytest.fixture
def namespace(controlplane: ControlPlane) -> Iterator[str]:
    # Deleted even when the test fails: bound pods hold node GPUs that later
    # tests of the session may need.
    name = controlplane.create_namespace(f"smoke-{uuid.uuid4().hex[:8]}")
    yield name
    controlplane.delete_namespace(name)


def training_pod(name: str, gpus: int) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"gpu-pool": "training"},
            "tolerations": [
                {
                    "key": "gpu-pool",
                    "operator": "Equal",
                    "value": "training",
                    "effect": "NoSchedule",
                },
            ],
            "containers": [
                {
                    "name": "train",
                    "image": "registry.example/train:1",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }
    return json.dumps(pod)


def test_the_apiserver_and_kubectl_are_the_pinned_release(controlplane: ControlPlane) -> None:
    versions = json.loads(controlplane.kubectl("version", "--output=json").stdout)

    assert versions["clientVersion"]["gitVersion"] == pinned_kubernetes_version()
    assert versions["serverVersion"]["gitVersion"] == pinned_kubernetes_version()


def test_a_deployment_gets_its_pods_from_the_controller_manager(
    controlplane: ControlPlane, namespace: str
) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]},
            },
        },
    }
    controlplane.apply(json.dumps(deployment), namespace=namespace)

    controlplane.wait_for(
        lambda: len(controlplane.list_json("pods", namespace, "app=web")) == 2,
        timeout=60,
        what="the Deployment's two pods",
    )


def test_a_pod_asking_eight_gpus_is_bound_to_a_training_node(
    controlplane: ControlPlane, gpu_fleet: list[NodeSpec], namespace: str
) -> None:
    controlplane.apply(training_pod("train-8", 8), namespace=namespace)

    node = controlplane.wait_for_binding(namespace, "train-8", timeout=60)

    assert node in nodes_in_pool("training", gpu_fleet)


def test_a_pod_asking_nine_gpus_stays_pending_as_unschedulable(
    controlplane: ControlPlane, gpu_fleet: list[NodeSpec], namespace: str
) -> None:
    controlplane.apply(training_pod("train-9", 9), namespace=namespace)

    event = controlplane.wait_for_event(namespace, "train-9", "FailedScheduling", timeout=60)
    pod = controlplane.get_json("pod", "train-9", namespace)

    assert "Insufficient nvidia.com/gpu" in event["message"]
    assert pod["status"]["phase"] == "Pending"
    assert "nodeName" not in pod["spec"]
