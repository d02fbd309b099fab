"""What the review worker is sent of each inventory: the whole of it once, then what changed.

The worker judges large reviews against the inventory of the moment, and the live
inventory is a new object at each change of a node's facts. Pickled whole, the
inventory of 5,000 nodes and their ResourceSlices is 2.7 MB and took 400 to 600 ms of
the event loop, for the first large review after each change (measured in-process on
the fleet of ``benchmarks.scale``); the worker then worked its capacity out from
nothing.

So the worker holds the last inventory it was sent, under a version, and each job
carries an ``InventoryUpdate`` from that version: for each of the inventory's parts,
``SAME`` (the same object as before), the positions of the nodes or slices that are
other objects (``Patched``: the live inventory keeps a node's facts object while its
facts stay equal), or the part whole when its length changed or most of it did. The
worker rebuilds equal tuples, keeping its own objects where nothing changed, so its
engine's capacity tracker reads again only the nodes that changed
(``webhook.engine.capacity.now``). An update for a version the worker does not hold
raises ``StaleInventory``; the sender then starts again from a whole one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from webhook.engine.inventory import (
    DeviceClassFacts,
    Inventory,
    NodeFacts,
    PriorityClassFacts,
    ResourceSliceFacts,
)
from webhook.errors import GpuAdmissionError

__all__ = [
    "SAME",
    "Held",
    "InventoryUpdate",
    "Patched",
    "StaleInventory",
    "applied",
    "update_from",
]

T = TypeVar("T")


class Same(enum.Enum):
    """The part is the object the worker holds already."""

    SAME = "same"


SAME = Same.SAME


@dataclass(frozen=True, slots=True)
class Patched(Generic[T]):
    """A tuple of ``length`` items, those at the positions of ``changed`` replaced."""

    length: int
    changed: tuple[tuple[int, T], ...]


Part = Same | Patched[T] | tuple[T, ...] | None


@dataclass(frozen=True, slots=True)
class InventoryUpdate:
    """The inventory of ``version``, as a change from that of ``base`` (None: whole)."""

    base: int | None
    version: int
    nodes: Part[NodeFacts]
    resource_slices: Part[ResourceSliceFacts]
    priority_classes: Same | Mapping[str, PriorityClassFacts] | None
    device_classes: Same | Mapping[str, DeviceClassFacts] | None


class StaleInventory(GpuAdmissionError):
    """An update for a version the worker does not hold."""


Held = tuple[int, Inventory]
"""A version, and the inventory the worker holds under it."""


def update_from(held: Held | None, now: Inventory, version: int) -> InventoryUpdate:
    """``now``, numbered ``version``, as a change from ``held`` (its version, and the
    inventory the worker holds under it); whole when ``held`` is None."""
    if held is None:
        return InventoryUpdate(
            None, version, now.nodes, now.resource_slices, now.priority_classes,
            now.device_classes,
        )  # fmt: skip
    base, before = held
    return InventoryUpdate(
        base,
        version,
        _tuple_part(before.nodes, now.nodes),
        _tuple_part(before.resource_slices, now.resource_slices),
        SAME if now.priority_classes is before.priority_classes else now.priority_classes,
        SAME if now.device_classes is before.device_classes else now.device_classes,
    )


def applied(held: Held | None, update: InventoryUpdate) -> Inventory:
    """The inventory ``update`` describes, built on ``held`` (the worker's version and
    inventory, None when it holds none). Raises StaleInventory when ``update`` is from
    another version than the one held."""
    if update.base is None:
        before = Inventory()
    elif held is None or held[0] != update.base:
        holding = "none" if held is None else f"version {held[0]}"
        raise StaleInventory(f"an update from version {update.base}; the worker holds {holding}")
    else:
        before = held[1]
    return Inventory(
        nodes=_tuple_applied(before.nodes, update.nodes),
        priority_classes=(
            before.priority_classes if update.priority_classes is SAME else update.priority_classes
        ),
        resource_slices=_tuple_applied(before.resource_slices, update.resource_slices),
        device_classes=(
            before.device_classes if update.device_classes is SAME else update.device_classes
        ),
    )


def _tuple_part(before: tuple[T, ...] | None, now: tuple[T, ...] | None) -> Part[T]:
    if now is before:
        return SAME
    if before is None or now is None or len(before) != len(now):
        return now
    changed = tuple(
        (index, new) for index, (old, new) in enumerate(zip(before, now, strict=True))
        if old is not new
    )  # fmt: skip
    if 2 * len(changed) > len(now):
        return now
    return Patched(len(now), changed)


def _tuple_applied(before: tuple[T, ...] | None, part: Part[T]) -> tuple[T, ...] | None:
    if part is SAME:
        return before
    if not isinstance(part, Patched):
        return part
    if before is None or len(before) != part.length:
        raise StaleInventory("a patch of a tuple of another length than the one held")
    items: list[Any] = list(before)
    for index, item in part.changed:
        items[index] = item
    return tuple(items)
