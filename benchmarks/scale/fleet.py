"""What the scale benchmark writes to kube-apiserver: GPU nodes as GPU Feature Discovery
labels them, one ResourceSlice of each as NVIDIA's DRA driver publishes it, the policy
that reads both, and the pods the audit lists.

Every node is a DGX-class machine of eight GPUs. A third are inference nodes (A100
40GB, MIG in the mixed strategy with MIG off on every GPU, as most are), the rest
training nodes, A100 80GB and V100 32GB in turn. Each carries the labels GFD and
Node Feature Discovery put on such a node (``nvidia.com/gpu.*``, ``nvidia.com/cuda.*``,
``nvidia.com/mig.*``, ``feature.node.kubernetes.io/pci-10de.present``), the policy's
pool and model labels and its pool taint; its status says what a kubelet with the
device plugin reports: ``nvidia.com/gpu: 8`` in capacity and allocatable, Ready.
Kubernetes' own node builders (``tests.e2e.nodes``) make the manifest and status.

Its ResourceSlice is the one NVIDIA's driver (``gpu.nvidia.com``) publishes for a node
of eight whole GPUs: one pool named after the node, eight devices ``gpu-0`` ... with
the driver's attributes (type, productName, architecture, uuid, index, minor, brand,
driverVersion, cudaComputeCapability, cudaDriverVersion) and memory as capacity, built
on ``tests.e2e.dra``'s builders under NVIDIA's driver name.

The policy is the default policy with both pools taking GPUs ``both`` ways (device
plugin and DRA, as while a fleet moves over), so the live inventory watches Nodes,
PriorityClasses, ResourceSlices and DeviceClasses, every kind it can.
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass
from typing import Any

from tests.e2e import dra
from tests.e2e.nodes import (
    MODEL_LABEL,
    POOL_LABEL,
    PRODUCT_LABEL,
    ZONE_LABEL,
    NodeSpec,
    Taint,
    node_manifest,
    node_status,
)
from webhook.policy.load import default_policy_text

NVIDIA_DRIVER = "gpu.nvidia.com"
DRIVER_VERSION = "580.95.05"
CUDA_DRIVER = ("13", "0", "0")
ZONES = ("zone-a", "zone-b", "zone-c")
OPT_IN = {"gpu-admission.io/enabled": "true"}
WORKLOAD = "gpu-admission.io/workload"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@dataclass(frozen=True)
class Model:
    """One kind of GPU node: its pool and the policy's model name, what GFD says of its
    GPUs, and what the DRA driver says of them."""

    pool: str
    model: str
    product: str
    """GFD's nvidia.com/gpu.product (spaces as dashes)."""
    family: str
    memory_mib: int
    compute: tuple[int, int]
    mig_strategy: str | None
    host: dict[str, str]
    host_allocatable: dict[str, str]

    @property
    def product_name(self) -> str:
        """The DRA driver's productName: the product as nvidia-smi spells it."""
        return self.product.replace("-", " ", 1)

    @property
    def architecture(self) -> str:
        return self.family.capitalize()


A100_40GB = Model(
    "inference",
    "A100",
    "NVIDIA-A100-SXM4-40GB",
    "ampere",
    40960,
    (8, 0),
    "mixed",
    {"cpu": "256", "memory": "1056652Mi", "pods": "110", "ephemeral-storage": "15Ti"},
    {"cpu": "254", "memory": "1040268Mi"},
)
A100_80GB = Model(
    "training",
    "A100",
    "NVIDIA-A100-SXM4-80GB",
    "ampere",
    81920,
    (8, 0),
    None,
    {"cpu": "256", "memory": "2113304Mi", "pods": "110", "ephemeral-storage": "30Ti"},
    {"cpu": "254", "memory": "2096920Mi"},
)
V100_32GB = Model(
    "training",
    "V100",
    "Tesla-V100-SXM2-32GB",
    "volta",
    32768,
    (7, 0),
    None,
    {"cpu": "80", "memory": "528216Mi", "pods": "110", "ephemeral-storage": "7Ti"},
    {"cpu": "78", "memory": "511832Mi"},
)
MODELS = (A100_40GB, A100_80GB, V100_32GB)
GPUS_PER_NODE = 8


def node_name(index: int) -> str:
    return f"gpu-node-{index:05}"


def model_of(index: int) -> Model:
    return MODELS[index % len(MODELS)]


def gfd_labels(model: Model, gpus: int = GPUS_PER_NODE) -> dict[str, str]:
    """The labels GPU Feature Discovery (and NFD's PCI feature) put on a node of ``gpus``
    GPUs of ``model``."""
    major, minor, rev = CUDA_DRIVER
    labels = {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.product": model.product,
        "nvidia.com/gpu.count": str(gpus),
        "nvidia.com/gpu.memory": str(model.memory_mib),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.machine": "DGX-A100" if model.family == "ampere" else "DGX-1",
        "nvidia.com/gpu.compute.major": str(model.compute[0]),
        "nvidia.com/gpu.compute.minor": str(model.compute[1]),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
        "nvidia.com/cuda.driver-version.full": DRIVER_VERSION,
        "nvidia.com/cuda.runtime.major": major,
        "nvidia.com/cuda.runtime.minor": minor,
        "nvidia.com/mig.capable": "true" if model.family == "ampere" else "false",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/gfd.timestamp": "1764633600",
    }
    if model.mig_strategy is not None:
        labels["nvidia.com/mig.strategy"] = model.mig_strategy
    return labels


def node_spec(index: int) -> NodeSpec:
    model = model_of(index)
    labels = {
        POOL_LABEL: model.pool,
        MODEL_LABEL: model.model,
        ZONE_LABEL: ZONES[index % len(ZONES)],
        **gfd_labels(model),
    }
    capacity = {**model.host, "nvidia.com/gpu": str(GPUS_PER_NODE)}
    return NodeSpec(
        node_name(index),
        labels,
        capacity,
        model.host_allocatable,
        (Taint(POOL_LABEL, model.pool),),
    )


def node_object(index: int, now: datetime.datetime) -> dict[str, Any]:
    """The Node as created: manifest and status at once (a Node's status is kept on
    create, as the kubelet registers its node)."""
    spec = node_spec(index)
    node: dict[str, Any] = node_manifest(spec)
    node.update(node_status(spec, now))
    assert PRODUCT_LABEL in node["metadata"]["labels"]
    return node


def pool_taints(index: int) -> dict[str, Any]:
    """The merge patch that leaves the pool taint only (TaintNodesByCondition adds the
    not-ready one at create; no node-lifecycle controller lifts it here)."""
    return {"spec": {"taints": [taint.as_dict() for taint in node_spec(index).taints]}}


def _uuid(node: str, gpu: int) -> str:
    digest = hashlib.sha256(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def resource_slice(index: int, generation: int = 1) -> dict[str, Any]:
    """The ResourceSlice NVIDIA's DRA driver publishes for the node at ``index``."""
    name = node_name(index)
    model = model_of(index)
    devices = dra.whole_gpus(
        GPUS_PER_NODE, model.product_name, model.architecture, f"{model.memory_mib}Mi"
    )
    published: dict[str, Any] = dra.resource_slice(name, devices, generation)
    published["metadata"]["name"] = f"{name}-{NVIDIA_DRIVER}"
    published["spec"]["driver"] = NVIDIA_DRIVER
    compute = f"{model.compute[0]}.{model.compute[1]}"
    for gpu, device in enumerate(published["spec"]["devices"]):
        device["attributes"].update(
            {
                "uuid": {"string": _uuid(name, gpu)},
                "index": {"int": gpu},
                "minor": {"int": gpu},
                "brand": {"string": "Nvidia" if model.family == "ampere" else "Tesla"},
                # semantic versions: no leading zero, as the driver writes them
                "driverVersion": {
                    "version": ".".join(str(int(part)) for part in DRIVER_VERSION.split("."))
                },
                "cudaComputeCapability": {"version": f"{compute}.0"},
                "cudaDriverVersion": {"version": ".".join(CUDA_DRIVER)},
            }
        )
    return published


def device_classes() -> list[dict[str, Any]]:
    """NVIDIA's two DeviceClasses, selecting its driver's devices by type."""
    classes: list[dict[str, Any]] = []
    for name, kind in ((dra.GPU_CLASS, "gpu"), (dra.MIG_CLASS, "mig")):
        expression = (
            f"device.driver == '{NVIDIA_DRIVER}' && "
            f"device.attributes['{NVIDIA_DRIVER}'].type == '{kind}'"
        )
        classes.append(
            {
                "apiVersion": dra.RESOURCE_API,
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]},
            }
        )
    return classes


def priority_classes() -> list[dict[str, Any]]:
    """The default policy's PriorityClasses, as the chart installs them."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        for name, value in (("inference-priority", 1000000), ("training-priority", 1000))
    ]


def policy_text() -> str:
    """The default policy, every pool taking GPUs through the device plugin and DRA."""
    text = default_policy_text()
    both = text.replace("gpusThrough: devicePlugin", "gpusThrough: both")
    if both.count("gpusThrough: both") < 2:
        raise ValueError("the default policy no longer names gpusThrough for both pools")
    return both


# -- churn -----------------------------------------------------------------------


def churn_patch(step: int, nodes: int) -> tuple[str, str, dict[str, Any]]:
    """The ``step``-th change of a fleet of ``nodes``, node after node, as a cluster's
    churn makes them: even steps relabel a node (GFD's timestamp, which it rewrites
    every pass, and the GPU count it sees one short, then whole again), odd ones change
    its allocatable GPUs (one unhealthy, then back), each node's value turning at each
    pass over the fleet. The node's name, the subresource (``""`` or ``"status"``) and
    the merge patch."""
    index, lap = step % nodes, step // nodes
    gpus = str(GPUS_PER_NODE - 1 if lap % 2 == 0 else GPUS_PER_NODE)
    if step % 2 == 0:
        labels = {"nvidia.com/gfd.timestamp": str(1764633600 + step), "nvidia.com/gpu.count": gpus}
        return node_name(index), "", {"metadata": {"labels": labels}}
    return node_name(index), "status", {"status": {"allocatable": {"nvidia.com/gpu": gpus}}}


# -- the audited pods ------------------------------------------------------------


def namespace_name(index: int) -> str:
    return f"team-{index:04}"


def audited_pod(index: int) -> dict[str, Any]:
    """A pod of a class as its creator sends it, never scheduled: every tenth a training
    pod of a Job asking for eight GPUs, the others inference pods asking for one; every
    fiftieth sets NVIDIA_VISIBLE_DEVICES by hand, which the policy denies."""
    training = index % 10 == 0
    workload = "training" if training else "inference"
    gpus = "8" if training else "1"
    container: dict[str, Any] = {
        "name": "trainer" if training else "server",
        "image": f"registry.example/{workload}:5.4",
        "resources": {
            "limits": {"nvidia.com/gpu": gpus, "memory": "32Gi"},
            "requests": {"nvidia.com/gpu": gpus, "cpu": "4", "memory": "32Gi"},
        },
        "env": [{"name": "MODEL_NAME", "value": "llama-3-8b"}],
    }
    if index % 50 == 25:
        container["env"].append({"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"})
    labels = {WORKLOAD: workload, "app": f"{workload}-{index % 97}"}
    if training:
        labels["batch.kubernetes.io/job-name"] = f"train-{index % 89}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{workload}-{index:06}", "labels": labels},
        "spec": {"containers": [container], "restartPolicy": "Never"},
    }
