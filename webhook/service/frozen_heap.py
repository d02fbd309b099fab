"""What a LIST of the live inventory builds, kept out of the garbage collector's full
passes.

The inventory of a large cluster is most of a replica's objects: 5,000 nodes with their
ResourceSlices are about 150,000 objects the collector tracks, and a full collection
walks every one of them (83 ms, measured in-process on the fleet of
``benchmarks.scale``), holding the event loop for as long. Idle, full passes are rare;
under node churn each change leaves new objects behind, full passes come as they pile
up, and the reviews due meanwhile wait them out. At 5,000 nodes and 50 node changes a
second, review p99 went from 6.98 times idle to 0.83 with this freeze
(``make bench-scale``, BENCHMARKS.md).

So once every kind is listed, and again after each LIST that follows (a relist after
410 Gone, or after a failure), the young generations are collected and everything then
alive is frozen (``gc.freeze``): full passes skip it, and only what changed since is
walked. Frozen objects are still freed by their reference counts when a later snapshot
replaces them; only a reference cycle among them would outlive its use, and the
inventory's facts and snapshots form none. The serving process freezes what it built at
start-up the same way (``webhook.service.serve``).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

from webhook.engine.inventory import Inventory
from webhook.kube.inventory import InventoryStatus

__all__ = ["FreezeAfterLists", "each", "lists_when_synced"]

log = logging.getLogger("gpu_admission.inventory")


def lists_when_synced(status: InventoryStatus) -> int | None:
    """The LISTs made so far across every kind watched, or None until each was listed."""
    if not status.synced:
        return None
    return sum(kind.lists for kind in status.kinds())


class FreezeAfterLists:
    """An inventory ``on_change`` callback: freezes the heap at the first snapshot after
    every kind is listed, and at the first after each later LIST, once it ``follows`` the
    watcher's status."""

    def __init__(self, freeze: Callable[[], None] = gc.freeze) -> None:
        self._freeze = freeze
        self._status: Callable[[], InventoryStatus] | None = None
        self._frozen_at: int | None = None

    def follow(self, status: Callable[[], InventoryStatus]) -> None:
        """Read the LISTs made from ``status`` (the watcher's, made after this callback)."""
        self._status = status

    def __call__(self, inventory: Inventory) -> None:
        lists = None if self._status is None else lists_when_synced(self._status())
        if lists is None or lists == self._frozen_at:
            return
        self._frozen_at = lists
        started = time.monotonic()
        gc.collect(1)  # the young generations: a cycle just made is not frozen with the rest
        self._freeze()
        log.debug(
            "inventory listed; its objects are out of full collections",
            extra={
                "frozen_objects": gc.get_freeze_count(),
                "seconds": round(time.monotonic() - started, 4),
            },
        )


def each(*callbacks: Callable[[Inventory], None]) -> Callable[[Inventory], None]:
    """One ``on_change`` callback calling ``callbacks`` in order."""

    def call_each(inventory: Inventory) -> None:
        for callback in callbacks:
            callback(inventory)

    return call_each
