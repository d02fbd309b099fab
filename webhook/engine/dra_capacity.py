"""What each pool of a policy offers now through Dynamic Resource Allocation, worked out
once per inventory: per node, the whole GPUs and the MIG devices its ResourceSlices
publish, by GPU model and MIG profile.

Only the slices that count now are read (``webhook.engine.resource_slices.current_slices``:
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

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from webhook.engine.claims import GpuClasses
from webhook.engine.inventory import DeviceFacts, Inventory, NodeFacts, ResourceSliceFacts
from webhook.engine.resource_slices import DriverPool, current_slices
from webhook.policy.compiled import GPU_DEVICE, MIG_DEVICE, DraSettings, Policy, Pool


@dataclass(frozen=True, slots=True)
class NodeCount:
    """How many devices one node has."""

    count: int
    node: str


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
    """The GPU devices the schedulable nodes of one policy pool offer through DRA."""

    name: str
    nodes: tuple[NodeDevices, ...]
    """In name order; only nodes offering at least one GPU device."""

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    @property
    def models(self) -> frozenset[str]:
        return frozenset(m for node in self.nodes for m in node.models)

    def largest_gpus(self, model: str | None = None) -> NodeCount | None:
        """The node with the most whole GPUs (of `model`), the first by name on a tie;
        None when no node has one."""
        return self._gpu_leaders.get(model)

    def total_gpus(self, model: str | None = None) -> int:
        return sum(node.gpu_count(model) for node in self.nodes)

    def largest_mig(self, profile: str, model: str | None = None) -> NodeCount | None:
        """The node with the most MIG devices of `profile` (on GPUs of `model`)."""
        return self._mig_leaders.get((profile, model))

    @cached_property
    def _gpu_leaders(self) -> dict[str | None, NodeCount]:
        """Per model (None: any), the node `largest_gpus` names: worked out once per
        inventory, not per review over every node of the pool."""
        counts: dict[str | None, list[tuple[int, str]]] = {}
        for node in self.nodes:
            for model in (None, *node.models):
                counts.setdefault(model, []).append((node.gpu_count(model), node.name))
        return {m: leader for m, found in counts.items() if (leader := _largest(found))}

    @cached_property
    def _mig_leaders(self) -> dict[tuple[str, str | None], NodeCount]:
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
    if inventory.resource_slices is None:
        return DraNow(synced=False, gpu_classes=gpu_device_classes(policy, inventory))
    settings = policy.dra
    ours = [s for s in inventory.resource_slices if s.driver in settings.drivers]
    current = current_slices(ours)
    known = {node.name: node for node in inventory.nodes or ()}
    by_label = {pool.label_value: pool for pool in policy.pools.values()}
    counts: dict[str, _Counting] = {}
    models: dict[tuple[str, str], str | None] = {}
    """(pool, product) -> the pool's model: a product is read once, not once per device."""
    for piece in current.slices:
        keys = _AttributeKeys.of(settings, piece)
        for device in piece.devices:
            node_name = piece.node_of(device)
            if node_name is None:
                continue
            counting = counts.get(node_name)
            if counting is None:
                facts = known.get(node_name)
                pool = by_label.get(facts.labels.get(policy.pool_label, "")) if facts else None
                counting = counts[node_name] = _Counting(policy, facts, pool, models)
            counting.add(keys, device)
    offering = (counts[name].facts(name) for name in sorted(counts))
    nodes = {devices.name: devices for devices in offering if devices.gpus or devices.mig}
    members: dict[str, list[NodeDevices]] = {}
    for devices in nodes.values():
        if devices.pool is not None and devices.schedulable:
            members.setdefault(devices.pool, []).append(devices)
    return DraNow(
        synced=True,
        nodes=nodes,
        pools={name: DraPoolNow(name, tuple(found)) for name, found in members.items()},
        incomplete=current.incomplete,
        gpu_classes=gpu_device_classes(policy, inventory),
    )


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


def _largest(counts: Iterable[tuple[int, str]]) -> NodeCount | None:
    count, node = min(counts, key=lambda pair: (-pair[0], pair[1]), default=(0, ""))
    return NodeCount(count, node) if count > 0 else None
