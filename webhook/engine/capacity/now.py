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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from webhook.engine.capacity.offers import Largest, PoolOffer, Reached
from webhook.engine.dra.capacity import MOST_CHANGES_APART, DraNow, DraTracker
from webhook.engine.dra.capacity import UNKNOWN as DRA_UNKNOWN
from webhook.engine.inventory import (
    Inventory,
    NodeChange,
    NodeFacts,
    PriorityClassFacts,
    ResourceSliceFacts,
    changed_nodes,
)
from webhook.engine.kept import same_objects
from webhook.engine.seen_nodes import (
    Uncovered,
    is_gpu_node,
    kinds_of,
    nodes_with_devices,
    uncovered,
)
from webhook.policy.compiled import NodeKind, Policy, Pool

PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"


@dataclass(frozen=True)
class PoolNow:
    """The schedulable GPU nodes of one pool as the inventory saw them, by the extended
    resources they have allocatable: a ``webhook.engine.capacity.offers.PoolOffer`` for
    the policy's GPUs and MIG devices, and by resource name for any resource."""

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
    gpu_resource: str = "nvidia.com/gpu"
    mig_prefix: str = "nvidia.com/mig-"
    """The policy's names of whole GPUs and of MIG devices (``policy.gpu_resource``,
    ``policy.mig_prefix``), which the ``PoolOffer`` questions are asked in."""

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.nodes

    def largest_gpus(self, model: str | None = None) -> Largest | None:
        return self.largest_of(self.gpu_resource, model)

    def total_gpus(self, model: str | None = None) -> Decimal:
        return self.total_of(self.gpu_resource, model)

    def largest_mig(self, profile: str, model: str | None = None) -> Largest | None:
        return self.largest_of(self.mig_prefix + profile, model)

    def mig_profiles(self, model: str | None = None) -> list[str]:
        return [r.removeprefix(self.mig_prefix) for r in self.offered(self.mig_prefix, model)]

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

    def offer(self, name: str, reached: Reached) -> PoolOffer | None:
        """What pool `name` offers now to pods that reach GPUs as `reached` says; None
        while that is not known (no schedulable node offers GPUs that way, or the
        inventory has not synced): the policy's figures hold."""
        if reached is Reached.DRA:
            return self.dra.pool(name)
        return self.pools.get(name)


OUTSIDE_POOLS = NodePlace(pool=None, model=None)
GPU_OUTSIDE_POOLS = NodePlace(pool=None, model=None, offers_gpus=True)

STATIC = CapacityNow(pools={}, priority_classes=None)
"""Nothing known of the cluster: the policy's static figures hold everywhere."""


def capacity_now(policy: Policy, inventory: Inventory) -> CapacityNow:
    return CapacityTracker(policy).now(inventory)


class CapacityTracker:
    """``capacity_now`` for the inventories of one cluster in turn, redoing only what
    changed since the last. The live inventory keeps a node's facts object while they
    stay equal, so the nodes that changed are those whose facts are other objects: only
    they are read again, a pool's sums and largest nodes are moved by their difference
    (summed again only when one of them joins or leaves the pool, or was a largest node
    and shrank), and the kinds of uncovered GPU nodes stay the same object while none of
    them changes kind (placement answers are kept per that object). At 5,000 nodes, one
    node's allocatable changing costs a pass over identities, not over every node's facts
    and devices. When nodes come or go, or the slices change, everything is read again,
    still reusing what each unchanged node said.

    Safe from several threads: each call reads the last state and swaps in a new one
    whole; two calls at once both answer right and one of their states is kept."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._by_label = {pool.label_value: pool for pool in policy.pools.values()}
        self._dra = DraTracker(policy)
        self._state = _State()

    def __getstate__(self) -> dict[str, Policy]:
        """Pickled (with the engine, to the review worker) without what it followed: the
        worker's inventories are other objects, and the state of 5,000 nodes is not sent."""
        return {"policy": self.policy}

    def __setstate__(self, state: dict[str, Policy]) -> None:
        self.__init__(state["policy"])  # type: ignore[misc]

    def now(self, inventory: Inventory) -> CapacityNow:
        dra = self._dra.now(inventory)
        if inventory.nodes is None:
            return CapacityNow(pools={}, priority_classes=inventory.priority_classes, dra=dra)
        last = self._state
        slices = inventory.resource_slices
        state = None
        if last.with_devices is not None and last.slices is slices:
            changes = changed_nodes(last.facts, inventory.nodes, inventory.nodes_changed)
            if changes is not None and len(changes) <= MOST_CHANGES_APART:
                state = self._moved(last, inventory.nodes, changes)
        if state is None:
            state = self._whole(last, inventory.nodes, slices)
        self._state = state
        return CapacityNow(
            pools={name: summed.now for name, summed in state.pools.items()},
            priority_classes=inventory.priority_classes,
            nodes=state.places,
            dra=dra,
            gpu_node_kinds=state.kinds,
        )

    def _whole(
        self,
        last: _State,
        facts: tuple[NodeFacts, ...],
        slices: tuple[ResourceSliceFacts, ...] | None,
    ) -> _State:
        with_devices = last.with_devices
        if with_devices is None or last.slices is not slices:
            with_devices = nodes_with_devices(self.policy, slices or ())
        same_devices = with_devices is last.with_devices
        reads: dict[str, _NodeRead] = {}
        places: dict[str, NodePlace] = {}
        members: dict[str, list[_NodeRead]] = {}
        for node in facts:
            before = last.reads.get(node.name)
            if before is not None and before.facts is node and same_devices:
                one = before
            else:
                one = self._read(node, with_devices)
            reads[node.name] = one
            places[node.name] = one.place
            if one.place.pool is not None and one.member:
                members.setdefault(one.place.pool, []).append(one)
        pools = {
            name: self._summed(last.pools.get(name), name, found) for name, found in members.items()
        }
        kinds = kinds_of((name, one.uncovered) for name, one in sorted(reads.items()))
        if kinds == last.kinds:
            kinds = last.kinds
        return _State(slices, with_devices, facts, reads, places, pools, kinds)

    def _moved(
        self, last: _State, facts: tuple[NodeFacts, ...], changes: list[NodeChange]
    ) -> _State:
        """The last state with the nodes of `changes` read again."""
        assert last.with_devices is not None
        if not changes:
            return dataclasses.replace(last, facts=facts)
        reads = dict(last.reads)
        places = dict(last.places)
        pools = dict(last.pools)
        moved: dict[str, list[tuple[_NodeRead, _NodeRead]]] = {}
        regathered: set[str] = set()
        same_kinds = True
        for _, node in changes:
            before = reads[node.name]
            one = self._read(node, last.with_devices)
            reads[node.name] = one
            places[node.name] = one.place
            same_kinds = same_kinds and one.uncovered == before.uncovered
            was, now = before.pool_counted, one.pool_counted
            if was is not None and was == now:
                moved.setdefault(was, []).append((before, one))
            else:
                regathered.update(name for name in (was, now) if name is not None)
        for name, pairs in moved.items():
            if name not in regathered:
                pools[name] = pools[name].moved(self.policy.pools[name], pairs)
        for name in regathered:
            found = [one for one in reads.values() if one.pool_counted == name]
            if found:
                pools[name] = self._summed(None, name, found)
            else:
                pools.pop(name, None)
        kinds = last.kinds
        if not same_kinds:
            kinds = kinds_of((name, one.uncovered) for name, one in sorted(reads.items()))
        return _State(last.slices, last.with_devices, facts, reads, places, pools, kinds)

    def _read(self, node: NodeFacts, with_devices: frozenset[str]) -> _NodeRead:
        policy = self.policy
        gaps = uncovered(policy, node, with_devices)
        pool = self._by_label.get(node.labels.get(policy.pool_label, ""))
        if pool is None:
            place = GPU_OUTSIDE_POOLS if is_gpu_node(policy, node, with_devices) else OUTSIDE_POOLS
            return _NodeRead(node, place, False, (), gaps)
        model = _model_of(policy, pool, node)
        gpus = tuple(
            (resource, amount)
            for resource, amount in node.allocatable.items()
            if policy.is_gpu_resource(resource)
        )
        member = node.schedulable and bool(gpus)
        return _NodeRead(node, NodePlace(pool.name, model), member, gpus, gaps)

    def _summed(self, before: _PoolSummed | None, name: str, found: list[_NodeRead]) -> _PoolSummed:
        found.sort(key=lambda one: one.facts.name)
        if before is not None and same_objects(before.members, found):
            return before
        return _PoolSummed.of(self.policy, self.policy.pools[name], found)


_Key = tuple[str | None, str]
"""(GPU model or None for any model, resource)."""


@dataclass(frozen=True, slots=True)
class _NodeRead:
    """What one node's facts say for capacity, read once per facts object."""

    facts: NodeFacts
    place: NodePlace
    member: bool
    """Whether it counts for its pool: schedulable, with a GPU resource allocatable."""
    gpus: tuple[tuple[str, Decimal], ...]
    """Its allocatable GPU resources (the policy's), in its order."""
    uncovered: Uncovered | None
    """What makes its kind when no kind of the policy covers it (webhook.engine.seen_nodes)."""

    @property
    def pool_counted(self) -> str | None:
        """The pool it counts for, if any."""
        return self.place.pool if self.member else None

    def amounts(self) -> Iterator[tuple[_Key, Decimal]]:
        """Each (key, amount) it adds to its pool's sums."""
        model = self.place.model
        for resource, amount in self.gpus:
            yield (None, resource), amount
            if model:
                yield (model, resource), amount


@dataclass(frozen=True, slots=True)
class _PoolSummed:
    """A pool's nodes, in name order, and what they add up to."""

    members: tuple[_NodeRead, ...]
    at: Mapping[str, int]
    """Node name -> its place in `members`."""
    now: PoolNow

    @classmethod
    def of(cls, policy: Policy, pool: Pool, members: list[_NodeRead]) -> _PoolSummed:
        """Summed whole; `members` in name order."""
        largest: dict[_Key, Largest] = {}
        totals: dict[_Key, Decimal] = {}
        for one in members:
            for key, amount in one.amounts():
                totals[key] = totals.get(key, Decimal(0)) + amount
                best = largest.get(key)
                if best is None or amount > best.amount:
                    largest[key] = Largest(amount, one.facts.name)
        models = frozenset(one.place.model for one in members if one.place.model is not None)
        now = PoolNow(
            name=pool.name,
            nodes=tuple(one.facts.name for one in members),
            largest=largest,
            totals=totals,
            models=models,
            mig_strategies=_mig_strategies(members),
            unseen=_unseen(pool, models),
            gpu_resource=policy.gpu_resource,
            mig_prefix=policy.mig_prefix,
        )
        at = {one.facts.name: place for place, one in enumerate(members)}
        return cls(tuple(members), at, now)

    def moved(self, pool: Pool, pairs: list[tuple[_NodeRead, _NodeRead]]) -> _PoolSummed:
        """The same nodes with those of `pairs` (as they were, as they are) changed."""
        members = list(self.members)
        totals = dict(self.now.totals)
        fresh: dict[str, dict[_Key, Decimal]] = {}
        touched: set[_Key] = set()
        for before, one in pairs:
            members[self.at[one.facts.name]] = one
            for key, amount in before.amounts():
                totals[key] = totals.get(key, Decimal(0)) - amount
                touched.add(key)
            fresh[one.facts.name] = dict(one.amounts())
            for key, amount in fresh[one.facts.name].items():
                totals[key] = totals.get(key, Decimal(0)) + amount
                touched.add(key)
        largest = dict(self.now.largest)
        for key in touched:
            if not totals[key]:
                # A sum of nothing left, or of nodes that have none of it (allocatable 0):
                # as summed whole, the key stays while a node names it.
                found = _scanned(members, key)
                if found is None:
                    del totals[key]
                    largest.pop(key, None)
                else:
                    largest[key] = found
                continue
            leader = _leader(largest.get(key), key, fresh)
            largest[key] = leader if leader is not None else _scanned_named(members, key)
        now = self.now
        if any(b.place.model != o.place.model for b, o in pairs):
            models = frozenset(one.place.model for one in members if one.place.model is not None)
            now = dataclasses.replace(now, models=models, unseen=_unseen(pool, models))
        if any(_mig_label(b) != _mig_label(o) for b, o in pairs):
            now = dataclasses.replace(now, mig_strategies=_mig_strategies(members))
        now = dataclasses.replace(now, largest=largest, totals=totals)
        return _PoolSummed(tuple(members), self.at, now)


def _leader(
    last: Largest | None, key: _Key, fresh: Mapping[str, Mapping[_Key, Decimal]]
) -> Largest | None:
    """The node with the most of `key` (the first by name on a tie) when the nodes of
    `fresh` changed to the amounts it gives and `last` was the leader before; None when
    that cannot be told without looking at every node (the leader changed and shrank)."""
    candidates = [Largest(amounts[key], name) for name, amounts in fresh.items() if key in amounts]
    if last is not None:
        if last.node not in fresh:
            candidates.append(last)
        elif fresh[last.node].get(key, Decimal(0)) < last.amount:
            return None
    return min(candidates, key=lambda found: (-found.amount, found.node), default=None)


def _scanned(members: list[_NodeRead], key: _Key) -> Largest | None:
    """The node with the most of `key`, the first by name on a tie; None when none names it."""
    best: Largest | None = None
    for one in members:
        for found, amount in one.amounts():
            if found == key and (best is None or amount > best.amount):
                best = Largest(amount, one.facts.name)
    return best


def _scanned_named(members: list[_NodeRead], key: _Key) -> Largest:
    best = _scanned(members, key)
    assert best is not None, "a key with a total has a node"
    return best


def _mig_label(one: _NodeRead) -> str | None:
    return one.facts.labels.get(MIG_STRATEGY_LABEL)


def _mig_strategies(members: Iterable[_NodeRead]) -> frozenset[str]:
    return frozenset(label for one in members if (label := _mig_label(one)) is not None)


@dataclass(frozen=True)
class _State:
    slices: tuple[ResourceSliceFacts, ...] | None = None
    with_devices: frozenset[str] | None = None
    facts: tuple[NodeFacts, ...] | None = None
    reads: Mapping[str, _NodeRead] = field(default_factory=dict)
    places: Mapping[str, NodePlace] = field(default_factory=dict)
    pools: Mapping[str, _PoolSummed] = field(default_factory=dict)
    kinds: tuple[NodeKind, ...] = ()


def _model_of(policy: Policy, pool: Pool, node: NodeFacts) -> str | None:
    labelled = node.labels.get(policy.model_label)
    if labelled in pool.models:
        return labelled
    product = node.labels.get(PRODUCT_LABEL)
    return None if product is None else pool.model_of_product(product)


def _unseen(pool: Pool, seen: frozenset[str]) -> Pool | None:
    absent = {name: m for name, m in pool.models.items() if name not in seen}
    if not absent:
        return None
    largest = max(m.gpus_per_node for m in absent.values())
    return dataclasses.replace(pool, models=absent, gpus_per_node=largest)
