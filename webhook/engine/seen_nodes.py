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


def uncovered_gpu_nodes(
    policy: Policy,
    nodes: Iterable[NodeFacts],
    slices: Iterable[ResourceSliceFacts] | None = None,
) -> tuple[NodeKind, ...]:
    """A kind for each group of alike GPU nodes among `nodes` that no kind of the policy
    covers, in the order of their first nodes by name."""
    with_devices = nodes_with_devices(policy, slices or ())
    by_value = {pool.label_value: pool for pool in policy.pools.values()}
    found: dict[tuple[tuple[tuple[str, str], ...], tuple[Taint, ...]], list[str]] = {}
    pool_of: dict[tuple[tuple[tuple[str, str], ...], tuple[Taint, ...]], str] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        if not is_gpu_node(policy, node, with_devices):
            continue
        taints = node.taints
        value = node.labels.get(policy.pool_label)
        pool = by_value.get(value) if value is not None else None
        if pool is not None and _blocking(pool.taints) <= set(taints):
            continue  # judged as its pool's node (listed model, another, or none)
        if pool is None and value is not None and _taints_its_pool(policy, value, taints):
            continue  # judged as a node of a pool the policy does not name
        labels = tuple(
            (key, node.labels[key]) for key in sorted(policy.node_label_keys) if key in node.labels
        )
        key = (labels, taints)
        found.setdefault(key, []).append(node.name)
        pool_of[key] = pool.name if pool is not None else ""
    return tuple(
        NodeKind(
            pool=pool_of[key],
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
