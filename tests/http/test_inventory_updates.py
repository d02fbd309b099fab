"""What the review worker is sent of each inventory (webhook.http.inventory_updates): the
worker, across a process boundary, rebuilds the inventory of the moment, keeping its own
objects where nothing changed."""

from __future__ import annotations

import dataclasses
import pickle
from decimal import Decimal

import pytest

from webhook.engine.inventory import Inventory, NodeFacts, PriorityClassFacts
from webhook.http.inventory_updates import (
    SAME,
    Held,
    InventoryUpdate,
    Patched,
    StaleInventory,
    applied,
    update_from,
)


def node(name: str, gpus: int = 8) -> NodeFacts:
    return NodeFacts(name, {"gpu-pool": "inference"}, True, {"nvidia.com/gpu": Decimal(gpus)}, ())


NODES = tuple(node(f"gpu-{index}") for index in range(6))
CLASSES = {
    "inference-priority": PriorityClassFacts("inference-priority", 1000, "PreemptLowerPriority")
}


class Worker:
    """The worker's side: each update crosses a pickle, as a job's arguments do."""

    def __init__(self) -> None:
        self.held: Held | None = None

    def take(self, update: InventoryUpdate) -> Inventory:
        crossed = pickle.loads(pickle.dumps(update, protocol=pickle.HIGHEST_PROTOCOL))
        now = applied(self.held, crossed)
        self.held = (crossed.version, now)
        return now


def test_the_first_inventory_is_sent_whole() -> None:
    now = Inventory(nodes=NODES, priority_classes=CLASSES)

    update = update_from(None, now, 1)

    assert update.base is None and update.nodes == NODES
    assert Worker().take(update) == now


def test_a_changed_node_is_sent_alone_and_the_worker_keeps_its_other_objects() -> None:
    first = Inventory(nodes=NODES, priority_classes=CLASSES)
    changed = node("gpu-2", gpus=4)
    second = dataclasses.replace(first, nodes=(*NODES[:2], changed, *NODES[3:]))
    worker = Worker()
    held = worker.take(update_from(None, first, 1))
    assert held.nodes is not None

    update = update_from((1, first), second, 2)
    now = worker.take(update)

    assert update.nodes == Patched(6, ((2, changed),))
    assert update.priority_classes is SAME and update.resource_slices is SAME
    assert now == second
    assert now.nodes is not None
    assert [a is b for a, b in zip(now.nodes, held.nodes, strict=True)] == [True, True, False, True, True, True]  # fmt: skip
    assert now.priority_classes is held.priority_classes


def test_nodes_that_come_or_go_or_mostly_change_are_sent_whole() -> None:
    first = Inventory(nodes=NODES)
    joined = Inventory(nodes=(*NODES, node("gpu-6")))
    most = Inventory(nodes=tuple(node(n.name, gpus=1) for n in NODES[:4]) + NODES[4:])

    assert update_from((1, first), joined, 2).nodes == joined.nodes
    assert update_from((1, first), most, 2).nodes == most.nodes
    assert update_from((1, first), Inventory(nodes=None), 2).nodes is None


def test_the_same_inventory_again_is_sent_as_nothing_changed() -> None:
    first = Inventory(nodes=NODES, priority_classes=CLASSES)

    update = update_from((1, first), first, 2)

    assert (update.nodes, update.priority_classes, update.resource_slices) == (SAME, SAME, SAME)
    assert update.device_classes is SAME


def test_an_update_from_a_version_the_worker_does_not_hold_is_stale() -> None:
    first = Inventory(nodes=NODES)
    second = Inventory(nodes=(node("gpu-0", gpus=1), *NODES[1:]))
    worker = Worker()
    worker.take(update_from(None, first, 1))

    with pytest.raises(StaleInventory):
        worker.take(update_from((7, first), second, 8))
    with pytest.raises(StaleInventory):
        Worker().take(update_from((1, first), second, 2))
