"""webhook.service.frozen_heap: the heap frozen once per LIST, after every kind is listed."""

from __future__ import annotations

import gc

from webhook.engine.inventory import Inventory
from webhook.kube.inventory import InventoryStatus
from webhook.kube.reflector import KindStatus
from webhook.service.frozen_heap import FreezeAfterLists, each, lists_when_synced


def kind(name: str, lists: int) -> KindStatus:
    return KindStatus(name, lists > 0, 0, 1.0 if lists else None, None, lists, None)


def status(nodes: int, priority_classes: int) -> InventoryStatus:
    return InventoryStatus(kind("nodes", nodes), kind("priorityclasses", priority_classes))


def test_lists_count_only_once_every_kind_is_listed() -> None:
    assert lists_when_synced(status(1, 0)) is None
    assert lists_when_synced(status(1, 1)) == 2
    assert lists_when_synced(status(3, 1)) == 4


def test_the_heap_is_frozen_after_the_first_sync_and_after_each_relist_only() -> None:
    now = [status(1, 0)]
    freezes: list[int] = []
    freeze = FreezeAfterLists(lambda: freezes.append(len(freezes)))
    freeze.follow(lambda: now[0])

    freeze(Inventory())  # nodes listed, PriorityClasses not yet
    now[0] = status(1, 1)
    freeze(Inventory())  # both listed
    freeze(Inventory())  # a watch event
    now[0] = status(2, 1)
    freeze(Inventory())  # the nodes listed again

    assert freezes == [0, 1]


def test_nothing_is_frozen_before_following_a_watcher() -> None:
    freezes: list[None] = []
    FreezeAfterLists(lambda: freezes.append(None))(Inventory())
    assert freezes == []


def test_by_default_what_is_alive_is_moved_to_the_permanent_generation() -> None:
    """The freeze it makes by default is the collector's own (``gc.freeze``): what is
    alive then counts as frozen, out of every collection."""
    gc.collect()
    before = gc.get_freeze_count()
    kept = [[index] for index in range(1000)]
    freeze = FreezeAfterLists()
    freeze.follow(lambda: status(1, 1))
    try:
        freeze(Inventory())
        assert gc.get_freeze_count() >= before + len(kept)
        gc.collect()
        assert gc.get_freeze_count() >= before + len(kept), "a full collection left them"
    finally:
        gc.unfreeze()
    del kept


def test_each_calls_every_callback_in_order() -> None:
    called: list[str] = []
    both = each(lambda _: called.append("freeze"), lambda _: called.append("report"))
    both(Inventory())
    assert called == ["freeze", "report"]
