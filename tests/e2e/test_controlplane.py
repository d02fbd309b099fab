"""The e2e harness works: a real apiserver, controller-manager and scheduler."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from . import dra
from .build_controlplane import (
    BINARIES,
    RELEASE_VARIABLE,
    BuildFailed,
    active_release,
    bin_dir,
    pinned_helm_version,
    pinned_kubernetes_version,
    plan_progress,
)
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


@pytest.fixture
def dra_gpus(controlplane: ControlPlane, gpu_fleet: list[NodeSpec]) -> Iterator[dict[str, str]]:
    """Two whole A100s on one inference node and MIG devices on another, published
    through DRA; withdrawn afterwards so no other test sees them."""
    whole, sliced = nodes_in_pool("inference", gpu_fleet)[-1], nodes_in_pool("inference")[0]
    a100 = ("NVIDIA A100-SXM4-40GB", "Ampere")
    dra.publish(
        controlplane,
        [
            *dra.device_classes(),
            dra.resource_slice(whole, dra.whole_gpus(2, *a100, "40Gi")),
            dra.resource_slice(sliced, dra.mig_devices(4, "1g.5gb", 7, *a100, "5Gi")),
        ],
    )
    yield {"gpu": whole, "mig": sliced}
    for node in (whole, sliced):
        dra.withdraw(controlplane, node)
    controlplane.delete("deviceclass", [dra.GPU_CLASS, dra.MIG_CLASS])


def claiming_pod(name: str, device_class: str, count: int, selector: str | None = None) -> str:
    """A pod whose container claims ``count`` devices of ``device_class`` through a
    ResourceClaimTemplate of its own."""
    request: dict[str, object] = {"deviceClassName": device_class, "count": count}
    if selector is not None:
        request["selectors"] = [{"cel": {"expression": selector}}]
    template = {
        "apiVersion": dra.RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "tolerations": [{"key": "gpu-pool", "operator": "Exists"}],
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": name}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/serve:1",
                    "resources": {"claims": [{"name": "gpus"}]},
                }
            ],
        },
    }
    return f"{json.dumps(template)}\n---\n{json.dumps(pod)}"


def test_gpu_claims_are_allocated_from_published_resource_slices(
    controlplane: ControlPlane, dra_gpus: dict[str, str], namespace: str
) -> None:
    profile = f"device.attributes['{dra.DRIVER}'].profile == '1g.5gb'"
    controlplane.apply(claiming_pod("two-gpus", dra.GPU_CLASS, 2), namespace=namespace)
    controlplane.apply(claiming_pod("one-slice", dra.MIG_CLASS, 1, profile), namespace=namespace)

    assert controlplane.wait_for_binding(namespace, "two-gpus", timeout=60) == dra_gpus["gpu"]
    assert controlplane.wait_for_binding(namespace, "one-slice", timeout=60) == dra_gpus["mig"]
    claims = controlplane.list_json("resourceclaims", namespace)
    allocated = sorted(
        result["device"]
        for claim in claims
        for result in claim["status"]["allocation"]["devices"]["results"]
    )
    assert allocated == ["gpu-0", "gpu-1", "gpu-4-mig-1g-5gb-0"]


def test_a_claim_for_more_gpus_than_any_slice_holds_stays_pending(
    controlplane: ControlPlane, dra_gpus: dict[str, str], namespace: str
) -> None:
    controlplane.apply(claiming_pod("three-gpus", dra.GPU_CLASS, 3), namespace=namespace)

    event = controlplane.wait_for_event(namespace, "three-gpus", "FailedScheduling", timeout=60)

    assert "cannot allocate all claims" in event["message"]
    assert "nodeName" not in controlplane.get_json("pod", "three-gpus", namespace)["spec"]


def test_a_cold_build_says_which_binary_of_how_many_and_how_long_is_left() -> None:
    missing = list(BINARIES[1:3])

    first, second = plan_progress(missing)

    assert first.starting(missing[0]) == (
        "[1/2] building kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver): "
        "about 2 min cold on two cores, about 3 min left in all"
    )
    assert second.still(missing[1], 90) == (
        "[2/2] still building kube-controller-manager: 2 min of about 1 min"
    )


@pytest.mark.parametrize(
    ("asked", "version"),
    [("", "v1.36.3"), ("v1.36", "v1.36.3"), ("v1.34", "v1.34.4"), ("v1.34.4", "v1.34.4")],
)
def test_the_release_is_chosen_by_its_minor_or_its_version(
    monkeypatch: pytest.MonkeyPatch, asked: str, version: str
) -> None:
    monkeypatch.setenv(RELEASE_VARIABLE, asked)

    assert pinned_kubernetes_version() == version
    assert bin_dir().parent.name == f"k8s-{version}"


def test_a_release_that_is_not_here_is_refused_naming_those_that_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(RELEASE_VARIABLE, "v1.33")

    with pytest.raises(
        BuildFailed, match=r"v1\.33: no such release here \(known: v1\.36\.3, v1\.34\.4\)"
    ):
        active_release()


def test_the_older_release_runs_helm_3_and_the_pinned_one_helm_4(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(RELEASE_VARIABLE, "v1.34")
    older = pinned_helm_version()
    monkeypatch.delenv(RELEASE_VARIABLE)

    assert older.startswith("v3.") and pinned_helm_version().startswith("v4.")
