"""What each pool of a policy offers now, worked out once per inventory.

A node counts for a pool when it carries the pool's label value, takes new pods
(not cordoned) and advertises at least one GPU resource of the policy
(``nvidia.com/gpu`` or ``nvidia.com/mig-*``) as allocatable. A node's model is
the policy's model label when that names one of the pool's models, else the
model whose product the GPU Feature Discovery label ``nvidia.com/gpu.product``
ends with (``NVIDIA-A100-SXM4-40GB`` is ``A100-SXM4-40GB``).

A pool with no such node is not "empty now" but unknown: node groups scaled to
zero by an autoscaler, or a pool whose device plugin has not registered yet, keep
the policy's static figures. So do all pools while the Node list has never synced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from webhook.engine.dra_capacity import UNKNOWN as DRA_UNKNOWN
from webhook.engine.dra_capacity import DraNow, dra_now
from webhook.engine.inventory import Inventory, NodeFacts, PriorityClassFacts
from webhook.engine.seen_nodes import is_gpu_node, nodes_with_devices, uncovered_gpu_nodes
from webhook.policy.compiled import NodeKind, Policy, Pool

PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"


@dataclass(frozen=True, slots=True)
class Largest:
    amount: Decimal
    node: str


@dataclass(frozen=True)
class PoolNow:
    """The schedulable GPU nodes of one pool as the inventory saw them."""

    name: str
    nodes: tuple[str, ...]
    largest: Mapping[tuple[str | None, str], Largest]
    """(model or None for any model, resource) -> the node with the most of it."""
    totals: Mapping[tuple[str | None, str], Decimal]
    """(model or None for any model, resource) -> allocatable summed over those nodes."""
    models: frozenset[str] = field(default_factory=frozenset)
    mig_strategies: frozenset[str] = field(default_factory=frozenset)
    """The values of ``nvidia.com/mig.strategy`` on the pool's nodes."""
    unseen: Pool | None = None
    """The policy's pool cut down to its models with no node now (judged by the policy's
    figures, as a node group scaled to zero), or None when every model has a node."""

    def largest_of(self, resource: str, model: str | None = None) -> Largest | None:
        return self.largest.get((model, resource))

    def total_of(self, resource: str, model: str | None = None) -> Decimal:
        return self.totals.get((model, resource), Decimal(0))

    def offered(self, prefix: str, model: str | None = None) -> list[str]:
        """The resources starting with `prefix` some node (of `model`) offers, sorted."""
        return sorted(r for m, r in self.largest if m == model and r.startswith(prefix))


@dataclass(frozen=True, slots=True)
class NodePlace:
    """Where one node stands in the policy: its pool (None: no GPU pool) and GPU model
    (None: not known). A pod bound to the node by `spec.nodeName` lands there."""

    pool: str | None
    model: str | None
    offers_gpus: bool = False
    """Whether it is a GPU node by its own facts (webhook.engine.seen_nodes.is_gpu_node): a
    GPU node outside every pool (a pool label no pool has, or none yet) is a GPU node all
    the same."""


@dataclass(frozen=True)
class CapacityNow:
    pools: Mapping[str, PoolNow]
    """Pool name -> what it has now; pools with no schedulable GPU node are absent."""
    priority_classes: Mapping[str, PriorityClassFacts] | None
    """Every PriorityClass by name, or None when not known (the policy's values hold)."""
    nodes: Mapping[str, NodePlace] | None = None
    """Every node by name, cordoned or not, or None while the Node list is not known."""
    dra: DraNow = DRA_UNKNOWN
    """What the pools offer through Dynamic Resource Allocation now."""
    gpu_node_kinds: tuple[NodeKind, ...] = ()
    """The GPU nodes the policy's kinds of node do not cover, as kinds of their own (see
    webhook.engine.seen_nodes); none while the Node list is not known."""

    def pool(self, name: str) -> PoolNow | None:
        return self.pools.get(name)


OUTSIDE_POOLS = NodePlace(pool=None, model=None)
GPU_OUTSIDE_POOLS = NodePlace(pool=None, model=None, offers_gpus=True)

STATIC = CapacityNow(pools={}, priority_classes=None)
"""Nothing known of the cluster: the policy's static figures hold everywhere."""


def capacity_now(policy: Policy, inventory: Inventory) -> CapacityNow:
    dra = dra_now(policy, inventory)
    if inventory.nodes is None:
        return CapacityNow(pools={}, priority_classes=inventory.priority_classes, dra=dra)
    by_label = {pool.label_value: pool for pool in policy.pools.values()}
    with_devices = nodes_with_devices(policy, inventory.resource_slices or ())
    members: dict[str, list[tuple[NodeFacts, str | None]]] = {}
    places: dict[str, NodePlace] = {}
    for node in inventory.nodes:
        pool = by_label.get(node.labels.get(policy.pool_label, ""))
        if pool is None:
            gpu_node = is_gpu_node(policy, node, with_devices)
            places[node.name] = GPU_OUTSIDE_POOLS if gpu_node else OUTSIDE_POOLS
            continue
        model = _model_of(policy, pool, node)
        places[node.name] = NodePlace(pool.name, model)
        if node.schedulable and _offers_gpus(policy, node):
            members.setdefault(pool.name, []).append((node, model))
    pools = {name: _pool_now(policy, policy.pools[name], nodes) for name, nodes in members.items()}
    return CapacityNow(
        pools=pools,
        priority_classes=inventory.priority_classes,
        nodes=places,
        dra=dra,
        gpu_node_kinds=uncovered_gpu_nodes(policy, inventory.nodes, inventory.resource_slices),
    )


def _offers_gpus(policy: Policy, node: NodeFacts) -> bool:
    return any(policy.is_gpu_resource(resource) for resource in node.allocatable)


def _model_of(policy: Policy, pool: Pool, node: NodeFacts) -> str | None:
    labelled = node.labels.get(policy.model_label)
    if labelled in pool.models:
        return labelled
    product = node.labels.get(PRODUCT_LABEL)
    return None if product is None else pool.model_of_product(product)


def _pool_now(policy: Policy, pool: Pool, nodes: list[tuple[NodeFacts, str | None]]) -> PoolNow:
    largest: dict[tuple[str | None, str], Largest] = {}
    totals: dict[tuple[str | None, str], Decimal] = {}
    for node, model in sorted(nodes, key=lambda pair: pair[0].name):
        for resource, amount in node.allocatable.items():
            if not policy.is_gpu_resource(resource):
                continue
            for key in ((None, resource), (model, resource)) if model else ((None, resource),):
                totals[key] = totals.get(key, Decimal(0)) + amount
                best = largest.get(key)
                if best is None or amount > best.amount:
                    largest[key] = Largest(amount, node.name)
    models = frozenset(model for _, model in nodes if model is not None)
    return PoolNow(
        name=pool.name,
        nodes=tuple(sorted(node.name for node, _ in nodes)),
        largest=largest,
        totals=totals,
        models=models,
        mig_strategies=frozenset(
            node.labels[MIG_STRATEGY_LABEL]
            for node, _ in nodes
            if MIG_STRATEGY_LABEL in node.labels
        ),
        unseen=_unseen(pool, models),
    )


def _unseen(pool: Pool, seen: frozenset[str]) -> Pool | None:
    absent = {name: m for name, m in pool.models.items() if name not in seen}
    if not absent:
        return None
    largest = max(m.gpus_per_node for m in absent.values())
    return dataclasses.replace(pool, models=absent, gpus_per_node=largest)
