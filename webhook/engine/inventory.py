"""The cluster as the service last saw it: Nodes and PriorityClasses as plain data.

The Kubernetes client (``webhook.kube.inventory``) keeps an ``Inventory`` current and
hands the latest one to every review; the engine only reads it. An inventory that
has never synced (``nodes`` or ``priority_classes`` is None) means "not known": the
engine then uses the policy's static figures, exactly as without an inventory.

Only what admission decisions need is kept of a Node: its name, labels, whether
it takes new pods, and its allocatable extended resources (``nvidia.com/gpu``,
``nvidia.com/mig-1g.5gb``, ...); CPU, memory and the rest are dropped.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from webhook.engine.quantities import parse_quantity


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    labels: Mapping[str, str]
    schedulable: bool
    """False while the node is cordoned (``spec.unschedulable``)."""
    allocatable: Mapping[str, Decimal]
    """Allocatable extended resources (names with a ``/``), by name."""


@dataclass(frozen=True, slots=True)
class PriorityClassFacts:
    name: str
    value: int
    preemption_policy: str | None


@dataclass(frozen=True, slots=True)
class Inventory:
    nodes: tuple[NodeFacts, ...] | None = None
    """Every Node, or None until the Node list has synced once."""
    priority_classes: Mapping[str, PriorityClassFacts] | None = None
    """Every PriorityClass by name, or None until their list has synced once."""


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
    return NodeFacts(name, labels, spec.get("unschedulable") is not True, allocatable)


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
