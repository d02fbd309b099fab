"""The capacity of a cluster followed from inventory to inventory
(webhook.engine.capacity.now.CapacityTracker, webhook.engine.dra.capacity.DraTracker)
is the capacity worked out afresh, whatever changed in between.

The live inventory keeps a node's facts object while they stay equal, and the trackers
redo only what the objects that changed say. Hypothesis draws a small cluster and a run
of changes as a watch delivers them (a node's allocatable, labels, cordon or taints
changed, a node added or removed, the slices or DeviceClasses republished, facts
re-read equal) and checks every step against ``capacity_now`` of the same inventory.
"""

from __future__ import annotations

import dataclasses
import pickle
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.engine.capacity.now import CapacityTracker, capacity_now
from webhook.engine.dra.capacity import DraTracker, dra_now
from webhook.engine.inventory import (
    DeviceClassFacts,
    DeviceFacts,
    Inventory,
    NodeFacts,
    NodesChanged,
    ResourceSliceFacts,
    changed_nodes,
)
from webhook.kube.frozen_views import NameOrdered
from webhook.policy import Policy, load_policy_text
from webhook.policy.compiled import Taint
from webhook.policy.load import default_policy_text

DRIVER = "gpu.nvidia.com"
PRODUCTS = ("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-32GB")
POOL_TAINTS = {
    "inference": Taint("gpu-pool", "inference", "NoSchedule"),
    "training": Taint("gpu-pool", "training", "NoSchedule"),
}


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The default policy with inference on DRA and training both ways."""
    text = default_policy_text()
    text = text.replace("gpusThrough: devicePlugin", "gpusThrough: dra", 1)
    text = text.replace("gpusThrough: devicePlugin", "gpusThrough: both", 1)
    return load_policy_text(text, "tracked.yaml")


@st.composite
def node_facts(draw: st.DrawFn, name: str) -> NodeFacts:
    """A node as GPU Feature Discovery and the device plugin leave it, or not quite."""
    labels: dict[str, str] = {}
    pool = draw(st.sampled_from(["inference", "training", "other", None]))
    if pool is not None:
        labels["gpu-pool"] = pool
    if draw(st.booleans()):
        labels["nvidia.com/gpu.product"] = draw(st.sampled_from(PRODUCTS))
    if draw(st.booleans()):
        labels["nvidia-gpu-model"] = draw(st.sampled_from(["A100", "V100", "H100"]))
    if draw(st.booleans()):
        labels["nvidia.com/mig.strategy"] = draw(st.sampled_from(["mixed", "single", "none"]))
    if draw(st.booleans()):
        labels["nvidia.com/gpu.present"] = "true"
    allocatable = {
        resource: Decimal(amount)
        for resource, amount in draw(
            st.dictionaries(
                st.sampled_from(
                    ["nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/gpu.shared", "x/y"]
                ),
                st.integers(0, 8),  # 0: a device plugin that reports its GPUs unhealthy
                max_size=3,
            )
        ).items()
    }
    taints: tuple[Taint, ...] = ()
    if pool in POOL_TAINTS and draw(st.booleans()):
        taints = (POOL_TAINTS[pool],)
    return NodeFacts(name, labels, draw(st.booleans()), allocatable, taints)


@st.composite
def slice_of(draw: st.DrawFn, node: str) -> ResourceSliceFacts:
    devices = []
    for index in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["gpu", "mig", "channel"]))
        attributes: dict[str, str | int | bool] = {"type": kind}
        if draw(st.booleans()):
            attributes["productName"] = draw(st.sampled_from(PRODUCTS)).replace("-", " ", 1)
        if kind == "mig":
            attributes["profile"] = draw(st.sampled_from(["1g.5gb", "3g.20gb"]))
        devices.append(DeviceFacts(f"{kind}-{index}", attributes))
    generation = draw(st.integers(1, 2))
    return ResourceSliceFacts(f"{node}-slice", DRIVER, node, generation, 1, node, tuple(devices))


class Cluster:
    """The inventory a watch would publish: facts kept as objects unless they change, the
    nodes in name order as the watch orders them, telling which one changed."""

    def __init__(self, nodes: dict[str, NodeFacts], slices: dict[str, ResourceSliceFacts]):
        self.nodes = nodes
        self.slices = slices
        self.ordered: NameOrdered[NodeFacts] = NameOrdered()
        self.node_view = self.ordered.whole(nodes)
        self.slice_tuple: tuple[ResourceSliceFacts, ...] | None = tuple(
            slices[name] for name in sorted(slices)
        )
        self.classes: dict[str, DeviceClassFacts] = {}

    def inventory(self) -> Inventory:
        view = self.node_view
        changed = None
        if view.since is not None:
            changed = NodesChanged(view.since, view.items, (view.at,))
        return Inventory(view.items, {}, self.slice_tuple, self.classes, nodes_changed=changed)

    def set_node(self, facts: NodeFacts | None, name: str) -> None:
        if facts is None:
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = facts
        self.node_view = self.ordered.changed(self.nodes, name)

    def set_slices(self, slices: dict[str, ResourceSliceFacts] | None) -> None:
        if slices is None:
            self.slice_tuple = None
            return
        self.slices = slices
        self.slice_tuple = tuple(slices[name] for name in sorted(slices))


NAMES = [f"node-{index}" for index in range(8)]


@st.composite
def step(draw: st.DrawFn, cluster: Cluster) -> None:
    """One change as the watch delivers it, applied to `cluster`."""
    what = draw(
        st.sampled_from(
            ["node", "node", "node", "allocatable", "equal", "remove", "slices", "classes"]
        )
    )
    name = draw(st.sampled_from(NAMES))
    known = cluster.nodes.get(name)
    if what == "node":
        cluster.set_node(draw(node_facts(name)), name)
    elif what == "allocatable" and known is not None:
        amount = Decimal(draw(st.integers(0, 8)))
        allocatable = {**known.allocatable, "nvidia.com/gpu": amount}
        cluster.set_node(dataclasses.replace(known, allocatable=allocatable), name)
    elif what == "equal" and known is not None:
        # Re-read equal: a watch keeps the object, but a caller may not.
        cluster.set_node(dataclasses.replace(known, labels=dict(known.labels)), name)
    elif what == "remove":
        cluster.set_node(None, name)
    elif what == "slices":
        chosen = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=5))
        cluster.set_slices(draw(st.none() | st.just({n: draw(slice_of(n)) for n in chosen})))
    elif what == "classes":
        selector = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"'
        cluster.classes = {"admin-gpus": DeviceClassFacts("admin-gpus", (selector,))}


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=8))
    nodes = {name: draw(node_facts(name)) for name in names}
    chosen = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=6))
    return Cluster(nodes, {name: draw(slice_of(name)) for name in chosen})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_followed_capacity_is_the_capacity_worked_out_afresh(
    policy: Policy, data: st.DataObject
) -> None:
    cluster = data.draw(clusters())
    tracker = CapacityTracker(policy)
    dra = DraTracker(policy)
    for _ in range(data.draw(st.integers(1, 12))):
        inventory = cluster.inventory()
        fresh = capacity_now(policy, inventory)
        assert tracker.now(inventory) == fresh
        assert dra.now(inventory) == dra_now(policy, inventory)
        assert list(fresh.nodes or ()) == [node.name for node in inventory.nodes or ()]
        for _ in range(data.draw(st.integers(1, 2))):  # two: the tracker misses one
            data.draw(step(cluster))


def test_a_change_to_one_node_is_worked_out_from_the_last_inventory(policy: Policy) -> None:
    nodes = tuple(
        NodeFacts(
            f"node-{index}",
            {"gpu-pool": "training", "nvidia.com/gpu.product": PRODUCTS[1]},
            True,
            {"nvidia.com/gpu": Decimal(8)},
            (POOL_TAINTS["training"],),
        )
        for index in range(4)
    )
    tracker = CapacityTracker(policy)
    first = tracker.now(Inventory(nodes, {}, (), {}))
    shrunk = dataclasses.replace(nodes[0], allocatable={"nvidia.com/gpu": Decimal(7)})
    second = tracker.now(Inventory((shrunk, *nodes[1:]), {}, (), {}))

    pool = second.pools["training"]
    assert pool.total_of("nvidia.com/gpu") == 31
    assert pool.largest_of("nvidia.com/gpu") is not None
    assert pool.largest_of("nvidia.com/gpu").node == "node-1"  # the first of the eights
    # The kinds of uncovered nodes are the same object: placement answers stay kept.
    assert second.gpu_node_kinds is first.gpu_node_kinds


def test_changed_nodes_are_those_whose_facts_are_other_objects() -> None:
    a, b, c = (NodeFacts(name, {}, True, {}) for name in "abc")
    b2 = dataclasses.replace(b, schedulable=False)

    assert changed_nodes((a, b, c), (a, b2, c)) == [(b, b2)]
    assert changed_nodes((a, b, c), (a, b, c)) == []
    assert changed_nodes((a, b, c), (a, c)) is None  # a node went
    assert changed_nodes((a, b), (a, c)) is None  # another node in its place
    assert changed_nodes(None, (a,)) is None


def test_changed_nodes_as_told_by_the_inventory_when_told_from_the_same_tuples() -> None:
    a, b, c = (NodeFacts(name, {}, True, {}) for name in "abc")
    b2 = dataclasses.replace(b, schedulable=False)
    before, now = (a, b, c), (a, b2, c)

    assert changed_nodes(before, now, NodesChanged(before, now, (1,))) == [(b, b2)]
    # told from another tuple than the one followed: the pass over identities instead
    assert changed_nodes(before, now, NodesChanged((a, b, c), now, (0,))) == [(b, b2)]
    assert changed_nodes(before, now, NodesChanged(before, (a, b2, c), (0,))) == [(b, b2)]


def test_what_changed_is_not_pickled_with_the_inventory() -> None:
    a, b = NodeFacts("a", {}, True, {}), NodeFacts("b", {}, True, {})
    inventory = Inventory((a, b), nodes_changed=NodesChanged((a,), (a, b), (1,)))

    copy = pickle.loads(pickle.dumps(inventory))

    assert copy == inventory and copy.nodes_changed is None


def test_a_pickled_tracker_starts_over_and_answers_the_same(policy: Policy) -> None:
    node = NodeFacts("node-0", {"gpu-pool": "training"}, True, {"nvidia.com/gpu": Decimal(8)})
    inventory = Inventory((node,), {}, (), {})
    tracker = CapacityTracker(policy)
    followed = tracker.now(inventory)

    copy = pickle.loads(pickle.dumps(tracker))

    assert copy._state.facts is None  # nothing followed came along
    assert copy.now(inventory) == followed
