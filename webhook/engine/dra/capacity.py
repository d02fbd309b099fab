"""What each pool of a policy offers now through Dynamic Resource Allocation, worked out
once per inventory: per node, the whole GPUs and the MIG devices its ResourceSlices
publish, by GPU model and MIG profile.

Only the slices that count now are read (``webhook.engine.dra.resource_slices.current_slices``:
the newest complete generation of each driver's pool), and of those only the slices of the
policy's GPU drivers (``dra.drivers``). A device is a whole GPU when its type attribute is
``gpu``, a MIG device when it is ``mig`` and it names its profile; other devices (a
driver's passthrough or channel devices, say) are not GPUs.

A node's pool is the one its pool label names, as for the device plugin's resources. A
device's model is the pool's model whose product its product attribute is, or ends with
(``NVIDIA A100-SXM4-40GB`` is ``A100-SXM4-40GB``, the way ``nvidia.com/gpu.product`` is
read); failing that, the model the node's model label names; else not known (None).

A pool counts the devices of its schedulable nodes. As with the device plugin, a pool
with no such node is unknown rather than empty (a node group scaled to zero), and so is
everything while the ResourceSlices have never been listed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property

from webhook.engine.capacity.offers import Largest
from webhook.engine.dra.claims import GpuClasses
from webhook.engine.dra.resource_slices import DriverPool, current_slices
from webhook.engine.inventory import (
    DeviceClassFacts,
    DeviceFacts,
    Inventory,
    NodeChange,
    NodeFacts,
    ResourceSliceFacts,
    changed_nodes,
)
from webhook.engine.kept import same_objects
from webhook.policy.compiled import GPU_DEVICE, MIG_DEVICE, DraSettings, Policy, Pool


@dataclass(frozen=True)
class NodeDevices:
    """The GPU devices one node offers through DRA."""

    name: str
    pool: str | None
    """The policy's pool the node's label names; None outside every pool, or while the
    node is not known (not in the Node list, or the list not synced)."""
    schedulable: bool
    gpus: Mapping[str | None, int] = field(default_factory=dict)
    """GPU model (None: not known) -> whole GPUs."""
    mig: Mapping[tuple[str | None, str], int] = field(default_factory=dict)
    """(GPU model or None, MIG profile) -> MIG devices."""
    products: frozenset[str] = frozenset()
    """The product attributes of its devices, as published."""

    def gpu_count(self, model: str | None = None) -> int:
        """Its whole GPUs, of `model` when given."""
        return sum(n for m, n in self.gpus.items() if model is None or m == model)

    def mig_count(self, profile: str, model: str | None = None) -> int:
        """Its MIG devices of `profile`, on GPUs of `model` when given."""
        return sum(
            n for (m, p), n in self.mig.items() if p == profile and (model is None or m == model)
        )

    def mig_profiles(self, model: str | None = None) -> frozenset[str]:
        return frozenset(p for m, p in self.mig if model is None or m == model)

    @property
    def models(self) -> frozenset[str]:
        """The known models of its devices."""
        return frozenset(m for m in (*self.gpus, *(m for m, _ in self.mig)) if m is not None)


@dataclass(frozen=True)
class DraPoolNow:
    """The GPU devices the schedulable nodes of one policy pool offer through DRA: a
    ``webhook.engine.capacity.offers.PoolOffer``."""

    name: str
    nodes: tuple[NodeDevices, ...]
    """In name order; only nodes offering at least one GPU device."""

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    @property
    def models(self) -> frozenset[str]:
        return frozenset(m for node in self.nodes for m in node.models)

    def largest_gpus(self, model: str | None = None) -> Largest | None:
        """The node with the most whole GPUs (of `model`), the first by name on a tie;
        None when no node has one."""
        return self._gpu_leaders.get(model)

    def total_gpus(self, model: str | None = None) -> Decimal:
        return Decimal(sum(node.gpu_count(model) for node in self.nodes))

    def largest_mig(self, profile: str, model: str | None = None) -> Largest | None:
        """The node with the most MIG devices of `profile` (on GPUs of `model`)."""
        return self._mig_leaders.get((profile, model))

    @cached_property
    def _gpu_leaders(self) -> dict[str | None, Largest]:
        """Per model (None: any), the node `largest_gpus` names: worked out once per
        inventory, not per review over every node of the pool."""
        counts: dict[str | None, list[tuple[int, str]]] = {}
        for node in self.nodes:
            for model in (None, *node.models):
                counts.setdefault(model, []).append((node.gpu_count(model), node.name))
        return {m: leader for m, found in counts.items() if (leader := _largest(found))}

    @cached_property
    def _mig_leaders(self) -> dict[tuple[str, str | None], Largest]:
        """Per (profile, model or None), the node `largest_mig` names."""
        counts: dict[tuple[str, str | None], list[tuple[int, str]]] = {}
        for node in self.nodes:
            for profile in node.mig_profiles():
                for model in (None, *node.models):
                    count = node.mig_count(profile, model)
                    counts.setdefault((profile, model), []).append((count, node.name))
        return {key: leader for key, found in counts.items() if (leader := _largest(found))}

    def mig_profiles(self, model: str | None = None) -> list[str]:
        """The MIG profiles some node offers (on GPUs of `model`), sorted."""
        return sorted({p for node in self.nodes for p in node.mig_profiles(model)})


@dataclass(frozen=True)
class DraNow:
    synced: bool
    """False while the ResourceSlices have never been listed: nothing is known."""
    nodes: Mapping[str, NodeDevices] = field(default_factory=dict)
    """Every node offering GPU devices through DRA, in a pool or not, cordoned or not."""
    pools: Mapping[str, DraPoolNow] = field(default_factory=dict)
    """Policy pool -> its schedulable nodes' devices; pools with none are absent."""
    incomplete: tuple[DriverPool, ...] = ()
    """The policy drivers' pools whose newest generation is still arriving."""
    gpu_classes: GpuClasses | None = field(default=None, compare=False)
    """Which DeviceClasses give GPUs, the policy's and the cluster's others (see
    ``gpu_device_classes``); None for no policy's (``UNKNOWN``). Not compared: two
    inventories' devices are alike whatever classes select them."""

    def pool(self, name: str) -> DraPoolNow | None:
        return self.pools.get(name)

    def classes_for(self, policy: Policy) -> GpuClasses:
        """The one view of GPU DeviceClasses that mutation, validation and the offline
        check read claims through: this inventory's, or the policy's alone."""
        return self.gpu_classes or GpuClasses(policy.dra)


UNKNOWN = DraNow(synced=False)


def dra_now(policy: Policy, inventory: Inventory) -> DraNow:
    """What each pool of `policy` offers through DRA in `inventory`."""
    return DraTracker(policy).now(inventory)


MOST_CHANGES_APART = 256
"""Up to this many nodes changed since the last inventory, only they are read again;
beyond, every node is (it costs about the same, and the code is the simple one)."""


class DraTracker:
    """``dra_now`` for the inventories of one cluster in turn, redoing only what changed
    since the last: the slices are read again only when the slices or DeviceClasses are
    another object, and a node's devices only when its facts or its slices are. A node
    whose churn leaves its devices as they were (its allocatable GPUs, a label the DRA
    side does not read) keeps its ``NodeDevices``, and a pool whose nodes all kept theirs
    keeps its ``DraPoolNow`` and the leaders it worked out.

    Safe from several threads: each call reads the last state and swaps in a new one
    whole; two calls at once both answer right and one of their states is kept."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._by_label = {pool.label_value: pool for pool in policy.pools.values()}
        self._models: dict[tuple[str, str], str | None] = {}
        self._state = _DraState()

    def __getstate__(self) -> dict[str, Policy]:
        """Pickled (with the engine, to the review worker) without what it followed: the
        worker's inventories are other objects, and the state of 5,000 nodes is not sent."""
        return {"policy": self.policy}

    def __setstate__(self, state: dict[str, Policy]) -> None:
        self.__init__(state["policy"])  # type: ignore[misc]

    def now(self, inventory: Inventory) -> DraNow:
        last = self._state
        classes = last.classes
        if classes is None or classes[0] is not inventory.device_classes:
            classes = (inventory.device_classes, gpu_device_classes(self.policy, inventory))
        if inventory.resource_slices is None:
            self._state = _DraState(classes=classes)
            return DraNow(synced=False, gpu_classes=classes[1])
        read = last.read
        state = None
        if read is not None and read.source is inventory.resource_slices:
            changes = changed_nodes(last.facts, inventory.nodes or (), inventory.nodes_changed)
            if changes is not None and len(changes) <= MOST_CHANGES_APART:
                state = self._moved(last, classes, inventory.nodes or (), changes)
        else:
            read = _SlicesRead.of(self.policy.dra, inventory.resource_slices)
        if state is None:
            state = self._whole(last, classes, read, inventory.nodes)
        self._state = state
        return DraNow(
            synced=True,
            nodes=state.devices,
            pools=state.pools,
            incomplete=read.incomplete,
            gpu_classes=classes[1],
        )

    def _whole(
        self,
        last: _DraState,
        classes: _Classes,
        read: _SlicesRead,
        facts: tuple[NodeFacts, ...] | None,
    ) -> _DraState:
        """Every node's devices, each counted again unless its facts and slices are the
        last ones'."""
        known = {node.name: node for node in facts or ()}
        counted: dict[str, _NodeCounted] = {}
        nodes: dict[str, NodeDevices] = {}
        for name, pieces in read.by_node.items():
            one = self._counted(last.counted.get(name), name, known.get(name), pieces)
            counted[name] = one
            if one.devices is not None:
                nodes[name] = one.devices
        members: dict[str, list[NodeDevices]] = {}
        for devices in nodes.values():
            if devices.pool is not None and devices.schedulable:
                members.setdefault(devices.pool, []).append(devices)
        pools = {name: _pool(last.pools.get(name), name, found) for name, found in members.items()}
        return _DraState(classes, read, facts, counted, nodes, pools)

    def _moved(
        self,
        last: _DraState,
        classes: _Classes,
        facts: tuple[NodeFacts, ...],
        changes: list[NodeChange],
    ) -> _DraState:
        """The last state with the nodes of `changes` counted again (the slices are the
        same): a pool is gathered again only when one of its nodes' devices changed."""
        assert last.read is not None
        if not changes:
            return dataclasses.replace(last, classes=classes, facts=facts)
        counted = dict(last.counted)
        nodes = dict(last.devices)
        pools = dict(last.pools)
        touched: set[str] = set()
        for _, node in changes:
            before = counted.get(node.name)
            if before is None:
                continue  # no devices of the policy's drivers
            one = self._counted(before, node.name, node, before.pieces)
            counted[node.name] = one
            if one.devices is before.devices:
                continue
            touched.update(d.pool for d in (before.devices, one.devices) if d and d.pool)
            if one.devices is None:
                nodes.pop(node.name, None)
            elif node.name in nodes:
                nodes[node.name] = one.devices
            else:
                nodes = dict(sorted({**nodes, node.name: one.devices}.items()))
        for name in touched:
            found = [d for d in nodes.values() if d.pool == name and d.schedulable]
            found.sort(key=lambda devices: devices.name)
            if found:
                pools[name] = _pool(pools.get(name), name, found)
            else:
                pools.pop(name, None)
        return _DraState(classes, last.read, facts, counted, nodes, pools)

    def _counted(
        self,
        before: _NodeCounted | None,
        name: str,
        facts: NodeFacts | None,
        pieces: tuple[_Piece, ...],
    ) -> _NodeCounted:
        """One node's devices: `before` when its facts and slices are the same objects,
        its devices kept when they count the same."""
        if before is not None and before.facts is facts and before.pieces is pieces:
            return before
        devices = self._count(name, facts, pieces)
        if before is not None and devices == before.devices:
            devices = before.devices
        return _NodeCounted(facts, pieces, devices)

    def _count(
        self, name: str, facts: NodeFacts | None, pieces: tuple[_Piece, ...]
    ) -> NodeDevices | None:
        policy = self.policy
        pool = None
        if facts is not None:
            pool = self._by_label.get(facts.labels.get(policy.pool_label, ""))
        counting = _Counting(policy, facts, pool, self._models)
        for keys, on_node in pieces:
            for device in on_node:
                counting.add(keys, device)
        devices = counting.facts(name)
        return devices if devices.gpus or devices.mig else None


_Piece = tuple["_AttributeKeys", tuple[DeviceFacts, ...]]
"""Devices of one current slice on one node, with the keys the slice holds their
attributes under."""


@dataclass(frozen=True)
class _SlicesRead:
    """What the current slices of the policy's drivers publish, node by node."""

    source: tuple[ResourceSliceFacts, ...]
    """The inventory's slices this was read from."""
    incomplete: tuple[DriverPool, ...]
    by_node: Mapping[str, tuple[_Piece, ...]]
    """Node name -> its devices in slice order; nodes in name order."""

    @classmethod
    def of(cls, settings: DraSettings, slices: tuple[ResourceSliceFacts, ...]) -> _SlicesRead:
        current = current_slices(s for s in slices if s.driver in settings.drivers)
        by_node: dict[str, list[_Piece]] = {}
        for piece in current.slices:
            keys = _AttributeKeys.of(settings, piece)
            if piece.node is not None and all(d.node is None for d in piece.devices):
                by_node.setdefault(piece.node, []).append((keys, piece.devices))
                continue
            apart: dict[str, list[DeviceFacts]] = {}
            for device in piece.devices:
                node_name = piece.node_of(device)
                if node_name is not None:
                    apart.setdefault(node_name, []).append(device)
            for node_name, devices in apart.items():
                by_node.setdefault(node_name, []).append((keys, tuple(devices)))
        return cls(slices, current.incomplete, {n: tuple(by_node[n]) for n in sorted(by_node)})


@dataclass(frozen=True, slots=True)
class _NodeCounted:
    facts: NodeFacts | None
    pieces: tuple[_Piece, ...]
    devices: NodeDevices | None
    """None when none of its devices is a GPU or a MIG device."""


_Classes = tuple[Mapping[str, DeviceClassFacts] | None, GpuClasses]
"""The DeviceClasses read, and the GPU classes found among them."""


@dataclass(frozen=True)
class _DraState:
    classes: _Classes | None = None
    read: _SlicesRead | None = None
    facts: tuple[NodeFacts, ...] | None = None
    """The nodes' facts the devices were counted with."""
    counted: Mapping[str, _NodeCounted] = field(default_factory=dict)
    devices: Mapping[str, NodeDevices] = field(default_factory=dict)
    pools: Mapping[str, DraPoolNow] = field(default_factory=dict)


def _pool(before: DraPoolNow | None, name: str, found: list[NodeDevices]) -> DraPoolNow:
    """The pool of `found`, the one `before` when it holds the very same nodes' devices."""
    if before is not None and same_objects(before.nodes, found):
        return before
    return DraPoolNow(name, tuple(found))


def gpu_device_classes(policy: Policy, inventory: Inventory) -> GpuClasses:
    """The policy's GPU DeviceClasses and the cluster's others whose selectors name one
    of the policy's GPU drivers (``device.driver == "gpu.nvidia.com"``, or its
    attributes): an administrator's class of one GPU model, say, or the NVIDIA driver's
    own classes under names the policy does not list. Their devices are GPUs, MIG slices
    when a selector asks for the ``mig`` type; a class whose selector asks for another
    type (a driver's channel or passthrough devices) gives no GPU. A claim of one is
    judged as a GPU claim rather than let through as some other device's."""
    settings = policy.dra
    found: dict[str, str] = {}
    for name, facts in (inventory.device_classes or {}).items():
        if name in settings.device_classes:
            continue
        text = " ".join(facts.selectors)
        if not any(f'"{d}"' in text or f"'{d}'" in text for d in settings.drivers):
            continue
        types = set(_types(settings.type_attribute).findall(text))
        if types - {GPU_DEVICE, MIG_DEVICE}:
            continue
        found[name] = MIG_DEVICE if MIG_DEVICE in types else GPU_DEVICE
    return GpuClasses(settings, found)


def _types(attribute: str) -> re.Pattern[str]:
    """The values a selector asks of the type attribute, either way it is written."""
    name = re.escape(attribute)
    return re.compile(rf"""(?:\.{name}|\[\s*["']{name}["']\s*\])\s*==\s*["']([^"']*)["']""")


@dataclass(frozen=True, slots=True)
class _AttributeKeys:
    """The keys of the three attributes read, as one slice's devices hold them."""

    type: str
    product: str
    profile: str

    @classmethod
    def of(cls, settings: DraSettings, piece: ResourceSliceFacts) -> _AttributeKeys:
        return cls(
            piece.attribute_key(settings.type_attribute),
            piece.attribute_key(settings.product_attribute),
            piece.attribute_key(settings.profile_attribute),
        )


class _Counting:
    """The devices of one node, counted as they are read."""

    def __init__(
        self,
        policy: Policy,
        node: NodeFacts | None,
        pool: Pool | None,
        models: dict[tuple[str, str], str | None],
    ) -> None:
        self.pool = pool
        self.models = models
        self.schedulable = node.schedulable if node is not None else False
        labelled = node.labels.get(policy.model_label) if node is not None else None
        self.labelled = labelled if pool is not None and labelled in pool.models else None
        self.gpus: dict[str | None, int] = {}
        self.mig: dict[tuple[str | None, str], int] = {}
        self.products: set[str] = set()

    def add(self, keys: _AttributeKeys, device: DeviceFacts) -> None:
        attributes = device.attributes
        kind = attributes.get(keys.type)
        product = attributes.get(keys.product)
        profile = attributes.get(keys.profile)
        model = self.labelled
        if isinstance(product, str) and product:
            self.products.add(product)
            if self.pool is not None:
                known = (self.pool.name, product)
                if known not in self.models:
                    self.models[known] = self.pool.model_of_product(product)
                model = self.models[known] or model
        if kind == GPU_DEVICE:
            self.gpus[model] = self.gpus.get(model, 0) + 1
        elif kind == MIG_DEVICE and isinstance(profile, str) and profile:
            key = (model, profile)
            self.mig[key] = self.mig.get(key, 0) + 1

    def facts(self, name: str) -> NodeDevices:
        return NodeDevices(
            name=name,
            pool=self.pool.name if self.pool is not None else None,
            schedulable=self.schedulable,
            gpus=dict(self.gpus),
            mig=dict(self.mig),
            products=frozenset(self.products),
        )


def _largest(counts: Iterable[tuple[int, str]]) -> Largest | None:
    count, node = min(counts, key=lambda pair: (-pair[0], pair[1]), default=(0, ""))
    return Largest(Decimal(count), node) if count > 0 else None
