"""The live inventory: Nodes and PriorityClasses of the cluster, kept current.

Two ``Reflector`` threads (``webhook.kube.reflector``: LIST, WATCH from the
resourceVersion, relist on 410, back-off) keep one kind each; every change of
the facts the engine reads publishes a new immutable ``Inventory``
(``webhook.engine.inventory``) with one attribute assignment, so ``current`` is
read from any thread without a lock, once per review. Until a kind has been
listed once it is ``None`` in the snapshot: the policy's static figures hold.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kubernetes import client

from webhook.engine.inventory import (
    Inventory,
    NodeFacts,
    PriorityClassFacts,
    node_facts,
    priority_class_facts,
)
from webhook.kube.reflector import Backoff, KindStatus, Reflector

__all__ = [
    "NODES",
    "PRIORITY_CLASSES",
    "InventoryStatus",
    "InventoryWatcher",
]

log = logging.getLogger("gpu_admission.inventory")

NODES = "nodes"
PRIORITY_CLASSES = "priorityclasses"

DEFAULT_WATCH_TIMEOUT = 240
DEFAULT_PAGE_SIZE = 500
STOP_JOIN_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class InventoryStatus:
    nodes: KindStatus
    priority_classes: KindStatus

    @property
    def synced(self) -> bool:
        """Both kinds have been listed at least once."""
        return self.nodes.synced and self.priority_classes.synced

    def kinds(self) -> tuple[KindStatus, KindStatus]:
        return (self.nodes, self.priority_classes)


def _node_tuple(store: dict[str, NodeFacts]) -> tuple[NodeFacts, ...]:
    return tuple(store[name] for name in sorted(store))


_PriorityClassMap = Mapping[str, PriorityClassFacts]


def _priority_class_map(store: dict[str, PriorityClassFacts]) -> _PriorityClassMap:
    return MappingProxyType(dict(store))


# -- the watcher ---------------------------------------------------------------


class InventoryWatcher:
    """Nodes and PriorityClasses of the cluster behind ``api``, kept current.

    ``api`` is a ``kubernetes.client.ApiClient`` (``webhook.kube.client.api_client``). Nothing
    happens until ``start()``; ``current`` is ``Inventory()`` (nothing known) until then.
    ``on_change`` is called with each new snapshot, in order, from a watch thread; it
    should be quick and must not call ``stop()``. ``node_label_keys``, when given, are
    the only Node labels kept (see ``node_facts``).
    """

    def __init__(
        self,
        api: Any,
        *,
        node_label_keys: Collection[str] | None = None,
        relist_backoff_cap: float = 30.0,
        watch_timeout_seconds: int = DEFAULT_WATCH_TIMEOUT,
        page_size: int = DEFAULT_PAGE_SIZE,
        on_change: Callable[[Inventory], None] | None = None,
    ) -> None:
        if watch_timeout_seconds < 1:
            raise ValueError(f"watch_timeout_seconds must be positive: {watch_timeout_seconds}")
        self._on_change = on_change
        self._stop = threading.Event()
        self._publish_lock = threading.Lock()
        self._current = Inventory()
        self._threads: list[threading.Thread] = []
        common: dict[str, Any] = {
            "publish": self._publish,
            "stop": self._stop,
            "watch_timeout_seconds": watch_timeout_seconds,
            "page_size": page_size,
        }
        core: Any = client.CoreV1Api(api)
        scheduling: Any = client.SchedulingV1Api(api)
        self._nodes: Reflector[NodeFacts, tuple[NodeFacts, ...]] = Reflector(
            NODES,
            core.list_node,
            functools.partial(node_facts, label_keys=node_label_keys),
            _node_tuple,
            backoff=Backoff(cap=relist_backoff_cap),
            **common,
        )
        self._priority_classes: Reflector[PriorityClassFacts, _PriorityClassMap] = Reflector(
            PRIORITY_CLASSES,
            scheduling.list_priority_class,
            priority_class_facts,
            _priority_class_map,
            backoff=Backoff(cap=relist_backoff_cap),
            **common,
        )

    @property
    def current(self) -> Inventory:
        """The latest snapshot; read it once per review."""
        return self._current

    def start(self) -> None:
        """Start both watch threads (daemon threads); once only."""
        if self._threads:
            raise RuntimeError("the inventory watcher was already started")
        for reflector in self._reflectors():
            thread = threading.Thread(
                target=reflector.run, name=f"inventory-{reflector.kind}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = STOP_JOIN_TIMEOUT) -> None:
        """Stop both threads: close their watch connections and wait up to ``timeout``
        seconds in all. The last snapshot stays readable."""
        self._stop.set()
        for reflector in self._reflectors():
            reflector.close_stream()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    @property
    def running(self) -> bool:
        return any(thread.is_alive() for thread in self._threads)

    def status(self) -> InventoryStatus:
        return InventoryStatus(self._nodes.status(), self._priority_classes.status())

    def sync_age_seconds(self) -> dict[str, float | None]:
        """Seconds since each kind's cache was known current, by kind (``nodes``,
        ``priorityclasses``); None for a kind never synced."""
        now = time.monotonic()
        return {status.kind: status.age(now) for status in self.status().kinds()}

    def interrupt(self, resume_from: str | None = None) -> None:
        """End the live watch streams early, as the server's timeout does; each resumes
        from its last resourceVersion, or from ``resume_from`` if given (a test hook: a
        version the apiserver no longer holds makes it answer 410 Gone)."""
        for reflector in self._reflectors():
            reflector.interrupt(resume_from)

    def _reflectors(self) -> tuple[Reflector[Any, Any], ...]:
        return (self._nodes, self._priority_classes)

    def _publish(self) -> None:
        # Under the lock, so that the two threads publish one after the other and the
        # last snapshot holds both kinds' latest views; on_change sees them in order.
        with self._publish_lock:
            inventory = Inventory(self._nodes.view, self._priority_classes.view)
            self._current = inventory
            if self._on_change is not None:
                try:
                    self._on_change(inventory)
                except Exception:
                    log.exception("the inventory on_change callback failed")
