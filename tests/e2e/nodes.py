"""A realistic GPU fleet, registered as Node objects without kubelets.

Three pools, labelled and tainted the way the default policy expects:

* inference: DGX A100 40GB nodes, MIG in the mixed strategy (whole GPUs and
  MIG instances side by side, as the NVIDIA device plugin advertises them);
* training: DGX-1 V100 and DGX A100 80GB nodes, eight whole GPUs each;
* cpu: no GPUs, no pool label, no taint.

What a kubelet would report (capacity, allocatable, the Ready condition) is
written through the ``status`` subresource, since nothing else will.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .cluster import Cluster

POOL_LABEL = "gpu-pool"
MODEL_LABEL = "nvidia-gpu-model"
PRODUCT_LABEL = "nvidia.com/gpu.product"
ZONE_LABEL = "topology.kubernetes.io/zone"

# Added by the TaintNodesByCondition admission plugin to every Node at
# creation. The node-lifecycle controller would lift it once the node is
# Ready, but it is off (there are no kubelet heartbeats), so we lift it.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str = "NoSchedule"

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, str]
    # Allocatable CPU and memory: capacity less what the kubelet reserves for
    # the system. Other resources (GPUs, pods) are allocatable in full.
    host_allocatable: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()

    @property
    def pool(self) -> str | None:
        return self.labels.get(POOL_LABEL)

    @property
    def allocatable(self) -> dict[str, str]:
        return {**self.capacity, **self.host_allocatable}


def _pool_taint(pool: str) -> Taint:
    return Taint(POOL_LABEL, pool)


# Host resources of the DGX systems (CPU threads, memory) and a kubelet-like
# reservation, so allocatable is a little below capacity as on a real node.
_DGX_A100_40GB = {"cpu": "256", "memory": "1056652Mi", "pods": "110", "ephemeral-storage": "15Ti"}
_DGX_A100_40GB_ALLOCATABLE = {"cpu": "254", "memory": "1040268Mi"}
_DGX_A100_80GB = {"cpu": "256", "memory": "2113304Mi", "pods": "110", "ephemeral-storage": "30Ti"}
_DGX_A100_80GB_ALLOCATABLE = {"cpu": "254", "memory": "2096920Mi"}
_DGX1_V100 = {"cpu": "80", "memory": "528216Mi", "pods": "110", "ephemeral-storage": "7Ti"}
_DGX1_V100_ALLOCATABLE = {"cpu": "78", "memory": "511832Mi"}
_CPU_NODE = {"cpu": "64", "memory": "257696Mi", "pods": "110", "ephemeral-storage": "1Ti"}
_CPU_NODE_ALLOCATABLE = {"cpu": "62", "memory": "241312Mi"}


def _inference_node(name: str, zone: str, gpus: Mapping[str, int]) -> NodeSpec:
    labels = {
        POOL_LABEL: "inference",
        MODEL_LABEL: "A100",
        PRODUCT_LABEL: "NVIDIA-A100-SXM4-40GB",
        "nvidia.com/gpu.memory": "40960",
        "nvidia.com/gpu.count": "8",  # physical GPUs, whatever their MIG mode
        "nvidia.com/mig.strategy": "mixed",
        ZONE_LABEL: zone,
    }
    capacity = {**_DGX_A100_40GB, **{k: str(v) for k, v in gpus.items()}}
    return NodeSpec(name, labels, capacity, _DGX_A100_40GB_ALLOCATABLE, (_pool_taint("inference"),))


def _training_node(name: str, zone: str, model: str, product: str, memory_mib: int) -> NodeSpec:
    labels = {
        POOL_LABEL: "training",
        MODEL_LABEL: model,
        PRODUCT_LABEL: product,
        "nvidia.com/gpu.memory": str(memory_mib),
        "nvidia.com/gpu.count": "8",
        ZONE_LABEL: zone,
    }
    host, host_allocatable = (
        (_DGX1_V100, _DGX1_V100_ALLOCATABLE)
        if model == "V100"
        else (_DGX_A100_80GB, _DGX_A100_80GB_ALLOCATABLE)
    )
    capacity = {**host, "nvidia.com/gpu": "8"}
    return NodeSpec(name, labels, capacity, host_allocatable, (_pool_taint("training"),))


def _cpu_node(name: str, zone: str) -> NodeSpec:
    return NodeSpec(name, {ZONE_LABEL: zone}, _CPU_NODE, _CPU_NODE_ALLOCATABLE)


# Eight A100-40GB per inference node. MIG layouts are ones the A100 allows
# (webhook/policies/mig-profiles.yaml has the per-GPU maxima):
#   a-0: 4 whole + 2 x (7 x 1g.5gb) + 1 x (3 x 2g.10gb) + 1 x (2 x 3g.20gb)
#   b-0: 4 whole + 1 x (7 x 1g.5gb) + 2 x (2 x 3g.20gb) + 1 x (1 x 7g.40gb)
#   c-0: 8 whole (MIG disabled)
INFERENCE_NODES = (
    _inference_node(
        "inference-a100-40g-a-0",
        "zone-a",
        {
            "nvidia.com/gpu": 4,
            "nvidia.com/mig-1g.5gb": 14,
            "nvidia.com/mig-2g.10gb": 3,
            "nvidia.com/mig-3g.20gb": 2,
        },
    ),
    _inference_node(
        "inference-a100-40g-b-0",
        "zone-b",
        {
            "nvidia.com/gpu": 4,
            "nvidia.com/mig-1g.5gb": 7,
            "nvidia.com/mig-3g.20gb": 4,
            "nvidia.com/mig-7g.40gb": 1,
        },
    ),
    _inference_node("inference-a100-40g-c-0", "zone-c", {"nvidia.com/gpu": 8}),
)

TRAINING_NODES = (
    _training_node("training-v100-a-0", "zone-a", "V100", "Tesla-V100-SXM2-32GB", 32768),
    _training_node("training-v100-b-0", "zone-b", "V100", "Tesla-V100-SXM2-32GB", 32768),
    _training_node("training-a100-80g-a-0", "zone-a", "A100", "NVIDIA-A100-SXM4-80GB", 81920),
    _training_node("training-a100-80g-b-0", "zone-b", "A100", "NVIDIA-A100-SXM4-80GB", 81920),
)

CPU_NODES = (_cpu_node("cpu-a-0", "zone-a"), _cpu_node("cpu-b-0", "zone-b"))

FLEET: tuple[NodeSpec, ...] = INFERENCE_NODES + TRAINING_NODES + CPU_NODES


def node_manifest(node: NodeSpec) -> dict[str, object]:
    labels = {
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **node.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels},
        "spec": {"taints": [t.as_dict() for t in node.taints]},
    }


def node_status(node: NodeSpec, now: datetime.datetime) -> dict[str, object]:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")

    def condition(kind: str, status: str, reason: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        }

    return {
        "status": {
            "capacity": dict(node.capacity),
            "allocatable": node.allocatable,
            "conditions": [
                condition("Ready", "True", "KubeletReady"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
        }
    }


def register_node(cluster: Cluster, node: NodeSpec) -> None:
    """Create the Node, report its status, then lift the not-ready taint."""
    cluster.apply(json.dumps(node_manifest(node)))
    now = datetime.datetime.now(datetime.UTC)
    cluster.kubectl(
        "patch",
        "node",
        node.name,
        "--subresource=status",
        "--type=merge",
        "--patch",
        json.dumps(node_status(node, now)),
    )
    # A merge patch replaces the whole taints list: exactly the pool taints remain.
    taints = {"spec": {"taints": [t.as_dict() for t in node.taints] or None}}
    cluster.kubectl("patch", "node", node.name, "--type=merge", "--patch", json.dumps(taints))


def register_fleet(cluster: Cluster, fleet: Sequence[NodeSpec] = FLEET) -> list[NodeSpec]:
    for node in fleet:
        register_node(cluster, node)
    return list(fleet)


def nodes_in_pool(pool: str | None, fleet: Sequence[NodeSpec] = FLEET) -> list[str]:
    """Names of the nodes of ``pool`` (``None``: the nodes without a GPU pool)."""
    return [node.name for node in fleet if node.pool == pool]
