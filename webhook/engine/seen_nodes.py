"""The GPU nodes the live inventory holds that the policy's kinds of node do not cover.

``Policy.node_kinds`` is every GPU node a cluster following the practice can hold: a
node carries the pool label (of a pool of the policy's or another) and its pool's taints.
Real clusters also hold GPU nodes that do not: one that joined before it was labelled
and tainted, one a team tainted by hand, one whose pool lost its taint. The inventory
knows them. A node is a GPU node by its own facts: a GPU resource allocatable, the pool
label, GPU Feature Discovery's ``nvidia.com/gpu.present=true``, or devices in a
ResourceSlice of one of the policy's DRA drivers.

Each such node no kind of the policy covers (it lacks the pool label, or lacks a taint
its pool's kind has) becomes a kind of its own (``SEEN``), with the policy's labels it
has and its blocking taints, so a pod is judged against it as against any kind. Nodes
alike in those are one kind, named by its first node and counted: a healthy cluster
adds none, and a pool of a thousand untainted nodes adds one.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.engine.inventory import NodeFacts, ResourceSliceFacts
from webhook.engine.placement import BLOCKING_EFFECTS
from webhook.policy.compiled import SEEN, NodeKind, Policy, Taint

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


Uncovered = tuple[tuple[tuple[str, str], ...], tuple[Taint, ...], str]
"""What makes an uncovered GPU node's kind: the policy's labels it has, its blocking
taints, and the name of its pool ("" for none of the policy's)."""


def uncovered_gpu_nodes(
    policy: Policy,
    nodes: Iterable[NodeFacts],
    slices: Iterable[ResourceSliceFacts] | None = None,
) -> tuple[NodeKind, ...]:
    """A kind for each group of alike GPU nodes among `nodes` that no kind of the policy
    covers, in the order of their first nodes by name."""
    with_devices = nodes_with_devices(policy, slices or ())
    return kinds_of(
        (node.name, uncovered(policy, node, with_devices))
        for node in sorted(nodes, key=lambda n: n.name)
    )


def uncovered(policy: Policy, node: NodeFacts, with_devices: frozenset[str]) -> Uncovered | None:
    """What makes `node`'s kind when it is a GPU node no kind of the policy covers; None
    when it is covered or no GPU node."""
    if not is_gpu_node(policy, node, with_devices):
        return None
    taints = node.taints
    value = node.labels.get(policy.pool_label)
    pool = None
    if value is not None:
        pool = next((p for p in policy.pools.values() if p.label_value == value), None)
    if pool is not None and _blocking(pool.taints) <= set(taints):
        return None  # judged as its pool's node (listed model, another, or none)
    if pool is None and value is not None and _taints_its_pool(policy, value, taints):
        return None  # judged as a node of a pool the policy does not name
    labels = tuple(
        (key, node.labels[key]) for key in sorted(policy.node_label_keys) if key in node.labels
    )
    return (labels, taints, pool.name if pool is not None else "")


def kinds_of(nodes: Iterable[tuple[str, Uncovered | None]]) -> tuple[NodeKind, ...]:
    """The kinds of the uncovered nodes among `nodes` (name, what `uncovered` said), in
    name order: one per group of alike nodes, named by its first."""
    found: dict[Uncovered, list[str]] = {}
    for name, key in nodes:
        if key is not None:
            found.setdefault(key, []).append(name)
    return tuple(
        NodeKind(
            pool=key[2],
            model="",
            labels=dict(key[0]),
            taints=key[1],
            shape=SEEN,
            node=names[0],
            nodes=len(names),
        )
        for key, names in found.items()
    )


def is_gpu_node(policy: Policy, node: NodeFacts, with_devices: frozenset[str]) -> bool:
    """Whether `node` gives pods GPUs, by its own facts."""
    return (
        policy.pool_label in node.labels
        or node.labels.get(GPU_PRESENT_LABEL) == "true"
        or any(policy.is_gpu_resource(resource) for resource in node.allocatable)
        or node.name in with_devices
    )


def _blocking(taints: tuple[Taint, ...]) -> set[Taint]:
    return {taint for taint in taints if taint.effect in BLOCKING_EFFECTS}


def _taints_its_pool(policy: Policy, value: str, taints: tuple[Taint, ...]) -> bool:
    """Whether a node whose pool label is `value` (no pool of the policy's) carries the
    taint the policy assumes such a node has: `<pool label>=<value>:NoSchedule`."""
    return Taint(policy.pool_label, value, "NoSchedule") in taints


def nodes_with_devices(policy: Policy, slices: Iterable[ResourceSliceFacts]) -> frozenset[str]:
    names: set[str] = set()
    for one in slices:
        if one.driver not in policy.dra.drivers:
            continue
        if one.node is not None and one.devices:
            names.add(one.node)
        names.update(d.node for d in one.devices if d.node is not None)
    return frozenset(names)
