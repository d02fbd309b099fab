"""The GPU nodes the live inventory holds that the policy's kinds of node do not cover."""

from __future__ import annotations

from decimal import Decimal

from tests.builders import admitted, pod
from webhook.engine import Engine
from webhook.engine.inventory import DeviceFacts, Inventory, NodeFacts, ResourceSliceFacts
from webhook.engine.seen_nodes import uncovered_gpu_nodes
from webhook.policy import load_default_policy
from webhook.policy.compiled import Taint

POLICY = load_default_policy()
TRAINING_TAINT = Taint("gpu-pool", "training", "NoSchedule")


def node(name: str, labels: dict[str, str], *taints: Taint, gpus: int = 0) -> NodeFacts:
    allocatable = {"nvidia.com/gpu": Decimal(gpus)} if gpus else {}
    return NodeFacts(name, labels, True, allocatable, taints)


def test_nodes_the_policy_covers_add_no_kind() -> None:
    nodes = [
        node("t-0", {"gpu-pool": "training", "nvidia-gpu-model": "V100"}, TRAINING_TAINT, gpus=8),
        node("t-1", {"gpu-pool": "training"}, TRAINING_TAINT, Taint("x", "", "NoExecute"), gpus=8),
        node("r-0", {"gpu-pool": "research"}, Taint("gpu-pool", "research", "NoSchedule"), gpus=8),
        node("cpu-0", {}),
    ]
    assert uncovered_gpu_nodes(POLICY, nodes) == ()


def test_gpu_nodes_unlabelled_or_untainted_become_kinds_of_their_own_counted() -> None:
    nodes = [
        node("gpu-b", {}, gpus=8),
        node("gpu-a", {}, gpus=8),
        node("gfd-0", {"nvidia.com/gpu.present": "true"}),
        node("t-9", {"gpu-pool": "training"}, gpus=8),
    ]
    kinds = uncovered_gpu_nodes(POLICY, nodes)
    assert [(k.node, k.nodes, k.pool, dict(k.labels)) for k in kinds] == [
        ("gfd-0", 3, "", {}),
        ("t-9", 1, "training", {"gpu-pool": "training"}),
    ]


def test_a_node_with_devices_of_the_drivers_slices_is_a_gpu_node() -> None:
    device = DeviceFacts("gpu-0", {"type": "gpu"})
    slices = [ResourceSliceFacts("s", "gpu.nvidia.com", "dra-0", 1, 1, "dra-0", (device,))]
    kinds = uncovered_gpu_nodes(POLICY, [node("dra-0", {})], slices)
    assert [k.node for k in kinds] == ["dra-0"]


def test_a_cpu_pod_tolerating_gpu_pools_is_refused_naming_an_untainted_gpu_node() -> None:
    engine = Engine(POLICY)
    inventory = Inventory(nodes=(node("gpu-a", {}, gpus=8), node("cpu-0", {})))
    tolerating = pod(tolerations=[{"key": "gpu-pool", "operator": "Exists"}])
    decision = admitted(engine, tolerating, inventory)
    assert [v.rule for v in decision.violations] == ["non-gpu-placement"]
    assert "GPU node 'gpu-a' (no gpu-pool label; no taint)" in decision.message


def test_an_untainted_node_of_a_pool_is_its_pools_and_no_other_class_reaches_it() -> None:
    engine = Engine(POLICY)
    inventory = Inventory(nodes=(node("t-9", {"gpu-pool": "training"}, gpus=8),))
    assert admitted(engine, pod("training"), inventory).allowed
    assert admitted(
        engine, pod("inference", tolerations=[{"operator": "Exists"}]), inventory
    ).allowed
