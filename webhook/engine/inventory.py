"""The cluster as the service last saw it: Nodes, PriorityClasses and, for GPUs claimed
through Dynamic Resource Allocation, ResourceSlices and DeviceClasses, as plain data.

The Kubernetes client (``webhook.kube.inventory``) keeps an ``Inventory`` current and
hands the latest one to every review; the engine only reads it. An inventory that
has never synced (``nodes`` or ``priority_classes`` is None) means "not known": the
engine then uses the policy's static figures, exactly as without an inventory.

Only what admission decisions need is kept of a Node: its name, labels, whether
it takes new pods, the taints that keep pods off it, and its allocatable extended
resources (``nvidia.com/gpu``, ``nvidia.com/mig-1g.5gb``, ...); CPU, memory and the
rest are dropped. Of a ResourceSlice, its driver, pool, generation, node and devices
with the attributes the policy reads (``webhook.engine.dra.resource_slices`` reads them;
``webhook.engine.dra.capacity`` says what each pool offers of them).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.engine.placement import BLOCKING_EFFECTS
from webhook.engine.quantities import parse_quantity
from webhook.policy.compiled import Taint


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    labels: Mapping[str, str]
    schedulable: bool
    """False while the node is cordoned (``spec.unschedulable``)."""
    allocatable: Mapping[str, Decimal]
    """Allocatable extended resources (names with a ``/``), by name."""
    taints: tuple[Taint, ...] = ()
    """Its taints that keep pods off (NoSchedule, NoExecute), in its order."""


@dataclass(frozen=True, slots=True)
class PriorityClassFacts:
    name: str
    value: int
    preemption_policy: str | None


AttributeValue = str | int | bool
"""A device attribute's value: a string (or a version, as its text), an int or a bool."""


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """One device of a ResourceSlice."""

    name: str
    attributes: Mapping[str, AttributeValue]
    """The attributes kept, by name; a name in the slice driver's own domain is bare
    (``productName``, never ``gpu.nvidia.com/productName``)."""
    node: str | None = None
    """The device's own node, in a slice with ``perDeviceNodeSelection``; None otherwise."""


@dataclass(frozen=True, slots=True)
class ResourceSliceFacts:
    """One ResourceSlice: a part of the devices one driver publishes in one pool."""

    name: str
    driver: str
    pool: str
    """The name of the pool (a driver's pool, usually one per node; not a policy pool)."""
    generation: int
    """The pool's generation: slices of an older one are stale and do not count."""
    slice_count: int
    """``resourceSliceCount``: how many slices the pool's generation has in all."""
    node: str | None
    """``spec.nodeName``: the node of all its devices; None for slices of several nodes
    (``nodeSelector``, ``allNodes``) or of one node per device."""
    devices: tuple[DeviceFacts, ...] = ()

    def attribute(self, device: DeviceFacts, name: str) -> AttributeValue | None:
        """The value of attribute `name` of `device` (one of this slice's), or None. `name`
        is bare (the driver's own domain) or ``<domain>/<name>``."""
        return device.attributes.get(self.attribute_key(name))

    def attribute_key(self, name: str) -> str:
        """The key under which this slice's devices hold attribute `name`: bare in the
        driver's own domain."""
        domain, _, bare = name.rpartition("/")
        return bare if domain == self.driver else name

    def node_of(self, device: DeviceFacts) -> str | None:
        """The node `device` is on, or None when it is not on one node."""
        return device.node if device.node is not None else self.node


@dataclass(frozen=True, slots=True)
class DeviceClassFacts:
    name: str
    selectors: tuple[str, ...] = ()
    """The CEL expressions of its selectors, in order."""


@dataclass(frozen=True, slots=True)
class Inventory:
    nodes: tuple[NodeFacts, ...] | None = None
    """Every Node, or None until the Node list has synced once."""
    priority_classes: Mapping[str, PriorityClassFacts] | None = None
    """Every PriorityClass by name, or None until their list has synced once."""
    resource_slices: tuple[ResourceSliceFacts, ...] | None = None
    """The ResourceSlices of the policy's GPU drivers (every generation: see
    ``webhook.engine.dra.resource_slices.current_slices``), or None until listed once."""
    device_classes: Mapping[str, DeviceClassFacts] | None = None
    """Every DeviceClass by name, or None until their list has synced once."""
    nodes_changed: NodesChanged | None = field(default=None, compare=False, repr=False)
    """How `nodes` came from the last snapshot's, when the live inventory knows it: so
    that capacity is followed without a pass over every node (``changed_nodes``)."""


@dataclass(frozen=True, slots=True, eq=False)
class NodesChanged:
    """`now` is `since` with the nodes at the positions `at` other objects (the same
    names). It holds only in the process that made it: pickled, it is None, so that an
    inventory sent whole does not carry the tuple before it."""

    since: tuple[NodeFacts, ...]
    now: tuple[NodeFacts, ...]
    at: tuple[int, ...]

    def __reduce__(self) -> tuple[Callable[[], None], tuple[()]]:
        return _nothing, ()


def _nothing() -> None:
    return None


UNKNOWN = Inventory()
"""No inventory: the policy's static figures hold."""


def node_facts(node: Any, label_keys: Collection[str] | None = None) -> NodeFacts | None:
    """The facts of a Node object (as JSON), or None when it has no name.

    Only the labels in `label_keys` are kept when it is given: others change often
    (GPU Feature Discovery rewrites ``nvidia.com/gfd.timestamp`` every minute) and
    would make every such change a new inventory. Odd shapes never raise: a label or
    quantity that is not a string is skipped.
    """
    if not isinstance(node, Mapping):
        return None
    metadata = _mapping(node.get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        return None
    labels = {
        key: value
        for key, value in _mapping(metadata.get("labels")).items()
        if isinstance(key, str)
        and isinstance(value, str)
        and (label_keys is None or key in label_keys)
    }
    spec = _mapping(node.get("spec"))
    allocatable: dict[str, Decimal] = {}
    for resource, raw in _mapping(_mapping(node.get("status")).get("allocatable")).items():
        if not isinstance(resource, str) or "/" not in resource:
            continue
        if not isinstance(raw, str | int) or isinstance(raw, bool):
            continue
        amount = parse_quantity(raw)
        if amount is not None and amount > 0:
            allocatable[resource] = amount
    taints = tuple(
        dict.fromkeys(
            Taint(taint["key"], str(taint.get("value") or ""), taint["effect"])
            for taint in _list(spec.get("taints"))
            if isinstance(taint, Mapping)
            and isinstance(taint.get("key"), str)
            and isinstance(taint.get("value") or "", str)
            and taint.get("effect") in BLOCKING_EFFECTS
        )
    )
    return NodeFacts(name, labels, spec.get("unschedulable") is not True, allocatable, taints)


def priority_class_facts(priority_class: Any) -> PriorityClassFacts | None:
    """The facts of a PriorityClass object (as JSON), or None when unnamed or valueless."""
    if not isinstance(priority_class, Mapping):
        return None
    name = _mapping(priority_class.get("metadata")).get("name")
    value = priority_class.get("value")
    if not isinstance(name, str) or not name:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    preemption = priority_class.get("preemptionPolicy")
    return PriorityClassFacts(name, value, preemption if isinstance(preemption, str) else None)


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


NodeChange = tuple[NodeFacts, NodeFacts]
"""A node's facts in the last inventory and in this one: other objects, the same name."""


def changed_nodes(
    before: tuple[NodeFacts, ...] | None,
    now: tuple[NodeFacts, ...],
    known: NodesChanged | None = None,
) -> list[NodeChange] | None:
    """The nodes whose facts are other objects in `now` than in `before`, when both list
    the same nodes in the same order (the live inventory keeps a node's facts object while
    they stay equal, so this is a pass over identities, or none when `known` tells how
    `now` came from `before`); None when nodes came or went, or there is no `before`."""
    if before is None or len(before) != len(now):
        return None
    if now is before:
        return []
    if known is not None and known.since is before and known.now is now:
        changes = [(before[at], now[at]) for at in known.at]
    else:
        changes = [(old, new) for old, new in zip(before, now, strict=True) if old is not new]
    if any(old.name != new.name for old, new in changes):
        return None
    return changes
