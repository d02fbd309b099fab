"""The live inventory: Nodes and PriorityClasses of the cluster, kept current, and with
``dra`` on, the ResourceSlices and DeviceClasses (``resource.k8s.io/v1``) of GPUs claimed
through Dynamic Resource Allocation.

One ``Reflector`` thread per kind (``webhook.kube.reflector``: LIST, WATCH from the
resourceVersion, relist on 410, back-off) keeps it; every change of the facts the
engine reads publishes a new immutable ``Inventory`` (``webhook.engine.inventory``)
with one attribute assignment, so ``current`` is read from any thread without a lock,
once per review. Until a kind has been listed once it is ``None`` in the snapshot: the
policy's static figures hold. ResourceSlices are kept with every generation a driver
has published; ``webhook.engine.dra.resource_slices`` says which count.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from webhook.engine.dra.api import DEVICE_CLASSES, RESOURCE_SLICES
from webhook.engine.dra.resource_slices import device_class_facts, resource_slice_facts
from webhook.engine.inventory import (
    DeviceClassFacts,
    Inventory,
    NodeFacts,
    NodesChanged,
    PriorityClassFacts,
    ResourceSliceFacts,
    node_facts,
    priority_class_facts,
)
from webhook.kube.frozen_views import Copied, NameOrdered, Ordered
from webhook.kube.reflector import Backoff, KindStatus, Reflector

__all__ = [
    "DEVICE_CLASSES",
    "NODES",
    "PRIORITY_CLASSES",
    "RESOURCE_SLICES",
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
    resource_slices: KindStatus | None = None
    """None when ResourceSlices are not watched (``dra`` off)."""
    device_classes: KindStatus | None = None
    """None when DeviceClasses are not watched (``dra`` off)."""

    @property
    def synced(self) -> bool:
        """Every kind watched has been listed at least once."""
        return all(kind.synced for kind in self.kinds())

    def kinds(self) -> tuple[KindStatus, ...]:
        """The status of every kind watched."""
        watched = (self.nodes, self.priority_classes, self.resource_slices, self.device_classes)
        return tuple(kind for kind in watched if kind is not None)


def _nodes_changed(nodes: Ordered[NodeFacts] | None) -> NodesChanged | None:
    if nodes is None or nodes.since is None:
        return None
    return NodesChanged(nodes.since, nodes.items, (nodes.at,))


# -- the watcher ---------------------------------------------------------------


class InventoryWatcher:
    """Nodes and PriorityClasses of the cluster behind ``api``, kept current; with ``dra``,
    its ResourceSlices and DeviceClasses too.

    ``api`` is a ``kubernetes.client.ApiClient`` (``webhook.kube.client.api_client``). Nothing
    happens until ``start()``; ``current`` is ``Inventory()`` (nothing known) until then.
    ``on_change`` is called with each new snapshot, in order, from a watch thread; it
    should be quick and must not call ``stop()``. ``node_label_keys``, when given, are
    the only Node labels kept (see ``node_facts``); ``dra_drivers`` and
    ``device_attributes``, when given, the only ResourceSlices (by driver) and device
    attributes kept (see ``resource_slice_facts``): the slices of other drivers, and their
    changes, cost nothing.
    """

    def __init__(
        self,
        api: Any,
        *,
        node_label_keys: Collection[str] | None = None,
        dra: bool = False,
        dra_drivers: Collection[str] | None = None,
        device_attributes: Collection[str] | None = None,
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
        self._reflector_options: dict[str, Any] = {
            "publish": self._publish,
            "stop": self._stop,
            "watch_timeout_seconds": watch_timeout_seconds,
            "page_size": page_size,
        }
        self._backoff_cap = relist_backoff_cap
        core: Any = client.CoreV1Api(api)
        scheduling: Any = client.SchedulingV1Api(api)
        self._nodes: Reflector[NodeFacts, Ordered[NodeFacts]] = self._reflector(
            NODES,
            core.list_node,
            functools.partial(node_facts, label_keys=node_label_keys),
            NameOrdered(),
        )
        self._priority_classes: Reflector[PriorityClassFacts, Mapping[str, PriorityClassFacts]]
        self._priority_classes = self._reflector(
            PRIORITY_CLASSES, scheduling.list_priority_class, priority_class_facts, Copied()
        )
        self._resource_slices: Reflector[ResourceSliceFacts, Ordered[ResourceSliceFacts]]
        self._device_classes: Reflector[DeviceClassFacts, Mapping[str, DeviceClassFacts]]
        self._dra: tuple[Reflector[Any, Any], ...] = ()
        if dra:
            resource: Any = client.ResourceV1Api(api)
            self._resource_slices = self._reflector(
                RESOURCE_SLICES,
                resource.list_resource_slice,
                functools.partial(
                    resource_slice_facts, drivers=dra_drivers, attributes=device_attributes
                ),
                NameOrdered(),
            )
            self._device_classes = self._reflector(
                DEVICE_CLASSES, resource.list_device_class, device_class_facts, Copied()
            )
            self._dra = (self._resource_slices, self._device_classes)

    def _reflector(self, resource: Any, list_call: Any, facts: Any, store: Any) -> Any:
        """A reflector of `resource` publishing into this inventory, with a backoff of its
        own."""
        return Reflector(
            resource,
            list_call,
            facts,
            store,
            backoff=Backoff(cap=self._backoff_cap),
            **self._reflector_options,
        )

    @property
    def current(self) -> Inventory:
        """The latest snapshot; read it once per review."""
        return self._current

    def start(self) -> None:
        """Start a watch thread per kind (daemon threads); once only."""
        if self._threads:
            raise RuntimeError("the inventory watcher was already started")
        for reflector in self._reflectors():
            thread = threading.Thread(
                target=reflector.run, name=f"inventory-{reflector.kind}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = STOP_JOIN_TIMEOUT) -> None:
        """Stop the threads: close their watch connections and wait up to ``timeout``
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

    @property
    def watches_dra(self) -> bool:
        """Whether ResourceSlices and DeviceClasses are watched."""
        return bool(self._dra)

    def status(self) -> InventoryStatus:
        dra = (
            (self._resource_slices.status(), self._device_classes.status())
            if self._dra
            else (None, None)
        )
        return InventoryStatus(self._nodes.status(), self._priority_classes.status(), *dra)

    def sync_age_seconds(self) -> dict[str, float | None]:
        """Seconds since each kind's cache was known current, by kind (``nodes``,
        ``priorityclasses``, and with DRA ``resourceslices`` and ``deviceclasses``); None
        for a kind never synced."""
        now = time.monotonic()
        return {status.kind: status.age(now) for status in self.status().kinds()}

    def watch_events(self) -> dict[str, tuple[int, int]]:
        """Watch events applied so far and, of them, those that changed the cache, by
        kind (as ``sync_age_seconds``)."""
        return {status.kind: (status.events, status.changes) for status in self.status().kinds()}

    def interrupt(self, resume_from: str | None = None) -> None:
        """End the live watch streams early, as the server's timeout does; each resumes
        from its last resourceVersion, or from ``resume_from`` if given (a test hook: a
        version the apiserver no longer holds makes it answer 410 Gone)."""
        for reflector in self._reflectors():
            reflector.interrupt(resume_from)

    def _reflectors(self) -> tuple[Reflector[Any, Any], ...]:
        return (self._nodes, self._priority_classes, *self._dra)

    def _publish(self) -> None:
        # Under the lock, so that the threads publish one after the other and the last
        # snapshot holds every kind's latest view; on_change sees them in order.
        with self._publish_lock:
            nodes = self._nodes.view
            slices = self._resource_slices.view if self._dra else None
            inventory = Inventory(
                None if nodes is None else nodes.items,
                self._priority_classes.view,
                None if slices is None else slices.items,
                self._device_classes.view if self._dra else None,
                nodes_changed=_nodes_changed(nodes),
            )
            self._current = inventory
            if self._on_change is not None:
                try:
                    self._on_change(inventory)
                except Exception:
                    log.exception("the inventory on_change callback failed")
