"""Claims judged as pods will really use them, end to end through kubectl apply.

Two nodes of the test's own publish devices in ResourceSlices (``dra.py``): one of pool
inference-dra with four A100-40GB and a NIC of another driver, one of pool training-dra
with eight A100-80GB. Beside NVIDIA's two DeviceClasses the cluster has a NIC class and
a GPU class the policy does not name, whose selector picks the GPU driver's GPUs as the
NVIDIA DRA driver's own classes do. The real kube-scheduler allocates the claims the real
resource claim controller makes from the templates; no kubelet runs.

- A ``firstAvailable`` request whose GPU alternative no node holds falls back to the NIC:
  the scheduler really does so (shown in a namespace the webhook does not serve), so a
  class pod making that claim is refused, naming the alternative; one whose fallback is
  a GPU alternative a node holds is admitted and gets it.
- A claim of the unnamed GPU class is a GPU claim for mutation as for validation: no
  container gets ``nvidia.com/gpu``, and the one holding the claim keeps its GPUs visible.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import dra
from .controlplane import ControlPlane
from .nodes import register_node
from .test_dra_placement import (
    A100_40,
    A100_80,
    WORKLOAD,
    documents,
    dra_node,
    gpu_resources,
    mixed_policy_text,
    pod,
    refusal,
)
from .waiting import wait_for
from .webhook_server import WebhookServer

INFERENCE_NODE = "dra-alt-inf-0"
TRAINING_NODE = "dra-alt-train-0"
NIC_DRIVER = "nic.e2e.gpu-admission.io"
NIC_CLASS = "nic.example.com"
OWN_GPU_CLASS = "gpus.example.com"
"""A GPU DeviceClass of the cluster's that the policy does not name."""


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": dra.RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def nic_slice(node: str) -> dict[str, Any]:
    """One NIC of `node`, published by a driver that is not the policy's."""
    return {
        "apiVersion": dra.RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{NIC_DRIVER}"},
        "spec": {
            "nodeName": node,
            "driver": NIC_DRIVER,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "nic-0", "attributes": {"type": {"string": "nic"}}}],
        },
    }


@pytest.fixture(scope="module")
def alternatives_cluster(
    controlplane: ControlPlane,
    admission: WebhookServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The nodes, their slices and the four DeviceClasses, served with a policy of a DRA
    pool beside each device-plugin pool; all gone afterwards."""
    policy = tmp_path_factory.mktemp("claim-alternatives") / "mixed.yaml"
    policy.write_text(mixed_policy_text(), "utf-8")
    register_node(controlplane, dra_node(INFERENCE_NODE, "inference-dra"))
    register_node(controlplane, dra_node(TRAINING_NODE, "training-dra"))
    own = f"device.driver == '{dra.DRIVER}' && device.attributes['{dra.DRIVER}'].type == 'gpu'"
    dra.publish(
        controlplane,
        [
            *dra.device_classes(),
            device_class(OWN_GPU_CLASS, own),
            device_class(NIC_CLASS, f"device.driver == '{NIC_DRIVER}'"),
            dra.resource_slice(INFERENCE_NODE, dra.whole_gpus(4, *A100_40, "40Gi")),
            dra.resource_slice(TRAINING_NODE, dra.whole_gpus(8, *A100_80, "80Gi")),
            nic_slice(INFERENCE_NODE),
        ],
    )
    try:
        with admission.serving(controlplane.kubeconfig, policy, kubeconfig=controlplane.kubeconfig):
            wait_until_the_classes_count(admission)
            yield
    finally:
        for node in (INFERENCE_NODE, TRAINING_NODE):
            dra.withdraw(controlplane, node)
        controlplane.delete("resourceslice", [f"{INFERENCE_NODE}-{NIC_DRIVER}"])
        controlplane.delete("deviceclass", [dra.GPU_CLASS, dra.MIG_CLASS, OWN_GPU_CLASS, NIC_CLASS])
        controlplane.delete("node", [INFERENCE_NODE, TRAINING_NODE])


def wait_until_the_classes_count(admission: WebhookServer) -> None:
    """The service has listed the ResourceSlices and all four DeviceClasses."""

    def detail() -> str:
        return str(admission.readiness()["checks"]["inventory"]["detail"])

    wait_for(
        lambda: "resourceslices: " in detail() and "deviceclasses: 4 known" in detail(),
        30,
        "the service's inventory of ResourceSlices and DeviceClasses",
        interval=0.2,
        describe_last=detail,
    )


def alternatives_template(name: str, *alternatives: tuple[str, str, int]) -> dict[str, Any]:
    """A ResourceClaimTemplate of one request, ``gpus``, met by the first of
    `alternatives` (name, DeviceClass, count) that can be had."""
    subrequests = [
        {"name": sub, "deviceClassName": device_class, "count": count}
        for sub, device_class, count in alternatives
    ]
    return {
        "apiVersion": dra.RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "firstAvailable": subrequests}]}}},
    }  # fmt: skip


GPU_OR_NIC = alternatives_template("gpu-or-nic", ("big", dra.GPU_CLASS, 99), ("nic", NIC_CLASS, 1))


def allocated_requests(controlplane: ControlPlane, namespace: str) -> list[tuple[str, str, str]]:
    """(request, driver, pool) of every device allocated to a claim of `namespace`."""
    found = []
    for claim in controlplane.list_json("resourceclaims", namespace):
        allocation = claim.get("status", {}).get("allocation", {})
        for result in allocation.get("devices", {}).get("results", []):
            found.append((result["request"], result["driver"], result["pool"]))
    return sorted(found)


@pytest.mark.usefixtures("alternatives_cluster")
class TestFirstAvailable:
    def test_the_scheduler_gives_a_pod_the_nic_when_no_node_holds_its_gpu_alternative(
        self, controlplane: ControlPlane, plain_namespace: str
    ) -> None:
        unserved = pod("fallback", None, "gpu-or-nic")
        unserved["spec"]["nodeSelector"] = {"gpu-pool": "inference-dra"}
        unserved["spec"]["tolerations"] = [{"key": "gpu-pool", "operator": "Exists"}]
        controlplane.apply(documents(GPU_OR_NIC, unserved), namespace=plain_namespace)

        assert controlplane.wait_for_binding(plain_namespace, "fallback") == INFERENCE_NODE
        wait_for(
            lambda: (
                allocated_requests(controlplane, plain_namespace)
                == [("gpus/nic", NIC_DRIVER, INFERENCE_NODE)]
            ),
            30,
            "the claim allocated from the NIC alternative",
        )

    def test_a_class_pod_whose_claim_may_hold_the_nic_instead_of_gpus_is_refused(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        controlplane.apply(documents(GPU_OR_NIC), namespace=opted_in)

        stderr = refusal(controlplane, opted_in, pod("fallback", "inference", "gpu-or-nic"))

        assert 'admission webhook "validate.gpu-admission.io" denied the request' in stderr
        assert "claim 'c0' (ResourceClaimTemplate 'gpu-or-nic') request 'gpus' may be met" in (
            stderr
        )
        assert "'gpus/big' (99 GPUs of DeviceClass gpu.nvidia.com) can never be had" in stderr
        assert f"the largest node in pool inference-dra has 4 now (node {INFERENCE_NODE})" in (
            stderr
        )
        assert f"so the scheduler takes 'gpus/nic' (1 device of DeviceClass {NIC_CLASS}" in stderr
        assert "or remove 'gpus/nic'" in stderr
        assert controlplane.list_json("pods", opted_in) == []

    def test_a_class_pod_whose_first_alternative_no_node_holds_gets_the_next(
        self, controlplane: ControlPlane, opted_in: str
    ) -> None:
        big_or_two = alternatives_template(
            "big-or-two", ("big", dra.GPU_CLASS, 99), ("two", dra.GPU_CLASS, 2)
        )
        admitted = pod("two", "inference", "big-or-two")
        controlplane.apply(documents(big_or_two, admitted), namespace=opted_in)

        assert controlplane.wait_for_binding(opted_in, "two") == INFERENCE_NODE
        wait_for(
            lambda: (
                allocated_requests(controlplane, opted_in)
                == [("gpus/two", dra.DRIVER, INFERENCE_NODE)] * 2
            ),
            30,
            "the claim allocated from the second alternative",
        )


@pytest.mark.usefixtures("alternatives_cluster")
def test_a_claim_of_a_gpu_class_the_policy_does_not_name_is_a_gpu_claim_for_mutation(
    controlplane: ControlPlane, opted_in: str
) -> None:
    own = {
        "apiVersion": dra.RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "own-class"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": OWN_GPU_CLASS}}]}}},
    }  # fmt: skip
    trainer = pod("own", "training", "own-class")
    trainer["spec"]["containers"].insert(
        0, {"name": "sidecar", "image": "registry.example/sidecar:1"}
    )
    controlplane.apply(documents(own, trainer), namespace=opted_in)

    created = controlplane.get_json("pod", "own", opted_in)
    sidecar, main = created["spec"]["containers"]

    assert gpu_resources(created) == []
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in sidecar.get("env", [])
    assert "NVIDIA_VISIBLE_DEVICES" not in str(main.get("env", []))
    assert created["metadata"]["labels"][WORKLOAD] == "training"
    assert controlplane.wait_for_binding(opted_in, "own") == TRAINING_NODE
    wait_for(
        lambda: allocated_requests(controlplane, opted_in) == [("gpus", dra.DRIVER, TRAINING_NODE)],
        30,
        "the claim allocated from the unnamed class's GPUs",
    )
