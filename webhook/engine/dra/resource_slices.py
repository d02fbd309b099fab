"""ResourceSlices and DeviceClasses (``resource.k8s.io/v1``) read into inventory facts, and
which slices count now.

A DRA driver publishes the devices of one of its pools (usually one pool per node, named
after it) in one or more ResourceSlices. When the devices change it publishes the pool
again under a higher ``generation``, each slice saying how many slices that generation
has (``resourceSliceCount``), and removes the older slices afterwards. So, as
kube-scheduler does, only the newest generation of a pool counts, and only once all of
its slices are there: while they are arriving the pool is incomplete and offers nothing.

Odd shapes never raise: a slice without a driver, pool or sensible generation is not
kept, a device without a name is dropped, an attribute of an unknown kind is skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from webhook.engine.inventory import (
    AttributeValue,
    DeviceClassFacts,
    DeviceFacts,
    ResourceSliceFacts,
)

ATTRIBUTE_KINDS = ("string", "version", "int", "bool")
"""The keys of a DeviceAttribute, one of which holds its value."""


def resource_slice_facts(
    resource_slice: Any,
    *,
    drivers: Collection[str] | None = None,
    attributes: Collection[str] | None = None,
) -> ResourceSliceFacts | None:
    """The facts of a ResourceSlice object (as JSON), or None when it is unnamed, shaped
    wrongly, or of a driver not in `drivers` (when given).

    Only the attributes named in `attributes` are kept when it is given (bare names are
    in the driver's own domain): a driver publishes a dozen per device, and the engine
    reads three."""
    if not isinstance(resource_slice, Mapping):
        return None
    name = _mapping(resource_slice.get("metadata")).get("name")
    spec = _mapping(resource_slice.get("spec"))
    driver = spec.get("driver")
    pool = _mapping(spec.get("pool"))
    pool_name, generation, count = pool.get("name"), pool.get("generation"), _slice_count(pool)
    if not _text(name) or not _text(driver) or not _text(pool_name):
        return None
    if not _whole(generation) or count is None:
        return None
    if drivers is not None and driver not in drivers:
        return None
    kept = None if attributes is None else {_in_domain(a, driver) for a in attributes}
    devices = tuple(
        device
        for raw in spec.get("devices") or ()
        if (device := _device_facts(raw, driver, kept)) is not None
    )
    node = spec.get("nodeName")
    return ResourceSliceFacts(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        slice_count=count,
        node=node if _text(node) else None,
        devices=devices,
    )


def device_class_facts(device_class: Any) -> DeviceClassFacts | None:
    """The facts of a DeviceClass object (as JSON), or None when it has no name."""
    if not isinstance(device_class, Mapping):
        return None
    name = _mapping(device_class.get("metadata")).get("name")
    if not _text(name):
        return None
    selectors = _mapping(device_class.get("spec")).get("selectors")
    expressions: list[str] = []
    for selector in selectors if isinstance(selectors, list) else ():
        expression = _mapping(_mapping(selector).get("cel")).get("expression")
        if _text(expression):
            expressions.append(expression)
    return DeviceClassFacts(name, tuple(expressions))


@dataclass(frozen=True, slots=True)
class DriverPool:
    """One pool of one driver, as its slices say now."""

    driver: str
    pool: str
    generation: int
    """The newest generation any of its slices has."""
    slices: tuple[str, ...]
    """The names of the slices of that generation, sorted."""
    slice_count: int
    """How many slices that generation says it has (the largest any of them says)."""
    complete: bool
    """Whether exactly that many slices of it are there, all saying the same count."""


@dataclass(frozen=True, slots=True)
class CurrentSlices:
    slices: tuple[ResourceSliceFacts, ...]
    """The slices of the newest generation of each complete pool, in name order."""
    incomplete: tuple[DriverPool, ...] = ()
    """The pools whose newest generation has not all its slices yet: they offer nothing
    until it has, as kube-scheduler allocates nothing from them."""


def current_slices(slices: Iterable[ResourceSliceFacts]) -> CurrentSlices:
    """The slices that count now: the newest generation of each driver's pool, when all
    of its slices are there."""
    newest: dict[tuple[str, str], list[ResourceSliceFacts]] = {}
    for piece in slices:
        key = (piece.driver, piece.pool)
        kept = newest.get(key)
        if kept is None or piece.generation > kept[0].generation:
            newest[key] = [piece]
        elif piece.generation == kept[0].generation:
            kept.append(piece)
    counted: list[ResourceSliceFacts] = []
    incomplete: list[DriverPool] = []
    for (driver, pool), pieces in sorted(newest.items()):
        counts = {piece.slice_count for piece in pieces}
        state = DriverPool(
            driver=driver,
            pool=pool,
            generation=pieces[0].generation,
            slices=tuple(sorted(piece.name for piece in pieces)),
            slice_count=max(counts),
            complete=counts == {len(pieces)},
        )
        if state.complete:
            counted += pieces
        else:
            incomplete.append(state)
    return CurrentSlices(
        slices=tuple(sorted(counted, key=lambda piece: piece.name)),
        incomplete=tuple(incomplete),
    )


def _device_facts(raw: Any, driver: str, kept: set[str] | None) -> DeviceFacts | None:
    device = _mapping(raw)
    name = device.get("name")
    if not _text(name):
        return None
    attributes: dict[str, AttributeValue] = {}
    for key, value in _mapping(device.get("attributes")).items():
        if not isinstance(key, str):
            continue
        key = _in_domain(key, driver)
        if kept is not None and key not in kept:
            continue
        parsed = _attribute_value(value)
        if parsed is not None:
            attributes[key] = parsed
    node = device.get("nodeName")
    return DeviceFacts(name, attributes, node if _text(node) else None)


def _attribute_value(value: Any) -> AttributeValue | None:
    """The value of a DeviceAttribute ({"string": "gpu"}, {"int": 7}, ...)."""
    for kind in ATTRIBUTE_KINDS:
        held = _mapping(value).get(kind)
        if kind in ("string", "version") and isinstance(held, str):
            return held
        if kind == "int" and isinstance(held, int) and not isinstance(held, bool):
            return held
        if kind == "bool" and isinstance(held, bool):
            return held
    return None


def _in_domain(name: str, driver: str) -> str:
    """An attribute's name as kept: bare when in the driver's own domain."""
    domain, _, bare = name.rpartition("/")
    return bare if domain == driver else name


def _slice_count(pool: Mapping[Any, Any]) -> int | None:
    count = pool.get("resourceSliceCount")
    return count if _whole(count) and count >= 1 else None


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value)


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}
