"""Keep an ``Inventory`` of the cluster's Nodes and PriorityClasses current, informer-style.

One daemon thread per kind runs the loop a client-go reflector runs:

1. LIST the kind (in pages of ``page_size``), which gives every object and the
   collection's ``resourceVersion``; the store (name -> facts) is replaced by the result.
2. WATCH from that ``resourceVersion`` with bookmarks and a server-side timeout
   (``watch_timeout_seconds``, jittered up to +25 % so that replicas do not reconnect in
   step). Each ADDED / MODIFIED / DELETED event updates the store and the
   ``resourceVersion``; a BOOKMARK only moves the ``resourceVersion``. When the server
   ends the stream (the timeout), the watch resumes from the last ``resourceVersion``.
   The client's read timeout is a little longer than the server's, so a connection that
   died without a FIN or RST is noticed too.
3. A watch that the apiserver answers with 410 Gone ("too old resource version": the
   version was compacted away, or left the watch cache) means events were lost: back to
   1 at once. Any other failure (connection refused or reset, a 5xx, a timeout, a
   garbled stream) is logged once per distinct reason, waited out with an exponential
   back-off (``Backoff``: 0.5 s doubling to ``relist_backoff_cap``, with jitter; reset
   once a watch works again) and followed by a fresh LIST, since events may have been
   missed. An unexpected exception is logged with its traceback and treated the same
   way: the threads never die.

Objects are never deserialised into the client's models: responses are requested with
``_preload_content=False`` and parsed with ``orjson`` into the plain JSON dicts that
``webhook.engine.inventory.node_facts`` / ``priority_class_facts`` take. The watch stream
is one JSON event per line, split by ``split_lines``.

Only the facts the engine needs are kept (``NodeFacts`` drops conditions, heartbeats,
CPU and memory), so the many Node updates that change none of them (kubelet status
heartbeats) publish nothing. A change publishes a new immutable ``Inventory`` with one
attribute assignment: ``current`` is readable from any thread without a lock, and a
review reads it once. Until a kind has been listed once it is ``None`` in the snapshot,
which the engine reads as "not known" (the policy's static figures hold). After that a
kind keeps its last known contents through outages; ``status()`` and
``sync_age_seconds()`` tell how current they are (the age is reset by every LIST, watch
event, bookmark and normal end of a watch stream; the apiserver sends a bookmark about
once a minute, so a healthy age stays below about a minute and a half).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

import orjson
from kubernetes import client
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError, ProtocolError

from webhook.engine.inventory import (
    Inventory,
    NodeFacts,
    PriorityClassFacts,
    node_facts,
    priority_class_facts,
)
from webhook.kube import ApiException, api_error_message

__all__ = [
    "NODES",
    "PRIORITY_CLASSES",
    "Backoff",
    "InventoryStatus",
    "InventoryWatcher",
    "KindStatus",
    "describe_error",
    "split_lines",
]

log = logging.getLogger("gpu_admission.inventory")

NODES = "nodes"
PRIORITY_CLASSES = "priorityclasses"

GONE = 410
CONNECT_TIMEOUT = 10.0
"""Seconds to establish a connection to the apiserver."""
LIST_READ_TIMEOUT = 60.0
"""Seconds a LIST page may go without a byte arriving."""
WATCH_READ_MARGIN = 30.0
"""The client's read timeout on a watch exceeds the server-side timeout by this much."""
DEFAULT_WATCH_TIMEOUT = 240
DEFAULT_PAGE_SIZE = 500
STOP_JOIN_TIMEOUT = 5.0

Facts = TypeVar("Facts", NodeFacts, PriorityClassFacts)
View = TypeVar("View")


# -- pure helpers ------------------------------------------------------------


class Backoff:
    """Exponential back-off with jitter: ``initial`` doubling up to ``cap`` seconds.

    ``next()`` returns how long to wait now: a random point in the upper half of the
    current step (so that replicas spread out, yet never wait much less than intended),
    and doubles the step. ``reset()`` starts over after a success.
    """

    def __init__(
        self, initial: float = 0.5, cap: float = 30.0, rng: random.Random | None = None
    ) -> None:
        if initial <= 0 or cap < initial:
            raise ValueError(f"need 0 < initial <= cap, got initial={initial}, cap={cap}")
        self.initial = initial
        self.cap = cap
        self._rng = rng or random.Random()
        self._step = initial

    def next(self) -> float:
        step = self._step
        self._step = min(step * 2, self.cap)
        return step / 2 + self._rng.random() * step / 2

    def reset(self) -> None:
        self._step = self.initial


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The non-blank lines of a byte stream that arrives in arbitrary chunks.

    A watch stream is one JSON document per line; a chunk may hold several lines or a
    part of one. A last line without a newline is yielded as it is.
    """
    pending: list[bytes] = []
    for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if start < len(chunk):
                    pending.append(chunk[start:])
                break
            piece = chunk[start:end]
            if pending:
                pending.append(piece)
                piece = b"".join(pending)
                pending.clear()
            if piece.strip():
                yield piece
            start = end + 1
    rest = b"".join(pending)
    if rest.strip():
        yield rest


def describe_error(error: BaseException) -> str:
    """A short, stable description of a failed call, for status and logs.

    Stable means the same failure reads the same on every attempt (no URLs with
    resource versions, no object addresses), so that it is logged once, not per retry.
    """
    if isinstance(error, ApiException):
        return api_error_message(error)
    if isinstance(error, MaxRetryError) and error.reason is not None:
        return describe_error(error.reason)
    if isinstance(error, NewConnectionError):
        # "<HTTPSConnection(host=..., port=...)>: Failed to establish ...: [Errno 111] ..."
        message = str(error)
        return message.split(": ", 1)[1] if ": " in message else message
    if isinstance(error, ProtocolError) and len(error.args) == 2:
        cause = error.args[1]
        if isinstance(cause, BaseException):
            return f"{error.args[0]}: {describe_error(cause)}"
    message = str(error) or type(error).__name__
    return f"{type(error).__name__}: {message}"


# -- status -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KindStatus:
    """How current one kind's cache is."""

    kind: str
    """``nodes`` or ``priorityclasses``."""
    synced: bool
    """Listed at least once: the kind is in the snapshot (not None) from then on."""
    objects: int
    """Objects in the cache (those with a name the engine can use)."""
    current_at: float | None
    """``time.monotonic()`` when the cache was last known current: the last successful
    LIST, watch event, bookmark or normal end of a watch stream. None before the first."""
    resource_version: str | None
    """The version the cache reflects; a watch resumes from it."""
    lists: int
    """Successful LISTs so far (the first sync and every relist)."""
    last_error: str | None
    """Why the latest attempt failed, or None while it works."""

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the cache was known current, or None if never synced."""
        if self.current_at is None:
            return None
        return max(0.0, (time.monotonic() if now is None else now) - self.current_at)


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


# -- one kind ---------------------------------------------------------------


class _Expired(Exception):
    """The watch's resourceVersion is gone (410): relist."""


class _WatchFailed(Exception):
    """An ERROR event other than 410."""


class _Reflector(Generic[Facts, View]):
    """LIST + WATCH of one kind into a store of facts; see the module docstring."""

    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        convert: Callable[[Any], Facts | None],
        freeze: Callable[[dict[str, Facts]], View],
        *,
        publish: Callable[[], None],
        stop: threading.Event,
        backoff: Backoff,
        watch_timeout_seconds: int,
        page_size: int,
    ) -> None:
        self.kind = kind
        self._list_call = list_call
        self._convert: Callable[[Any], Facts | None] = convert
        self._freeze: Callable[[dict[str, Facts]], View] = freeze
        self._publish = publish
        self._stop = stop
        self._backoff = backoff
        self._watch_timeout = watch_timeout_seconds
        self._page_size = page_size
        self._store: dict[str, Facts] = {}
        self.view: View | None = None
        """The frozen store, or None before the first LIST; read by ``publish``."""
        self._lock = threading.Lock()
        self._synced = False
        self._current_at: float | None = None
        self._resource_version: str | None = None
        self._lists = 0
        self._error: str | None = None
        self._logged_error: str | None = None
        self._response: Any = None
        self._interrupt_requested = False
        self._resume_from: str | None = None
        self._expired_streak = 0

    # -- the thread ----------------------------------------------------------

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                self._list()
                self._watch()
            except _Expired as expired:
                self._expired_streak += 1
                log.info(
                    "inventory watch expired; relisting",
                    extra={"kind": self.kind, "reason": str(expired)},
                )
                if self._expired_streak > 1:
                    # Expired again right after a relist: do not hammer the apiserver.
                    self._stop.wait(self._backoff.next())
            except Exception as error:
                self._failed(error)

    def _failed(self, error: Exception) -> None:
        if self._stop.is_set():
            return
        try:
            reason = describe_error(error)
        except Exception:  # never let a strange exception end the thread
            reason = type(error).__name__
        delay = self._backoff.next()
        with self._lock:
            self._error = reason
        if reason != self._logged_error:
            self._logged_error = reason
            extra = {"kind": self.kind, "reason": reason, "retry_in_seconds": round(delay, 2)}
            expected = (ApiException, HTTPError, OSError, _WatchFailed, orjson.JSONDecodeError)
            if isinstance(error, expected):
                log.warning("inventory watch failed; will relist", extra=extra)
            else:
                log.exception("inventory watch failed unexpectedly; will relist", extra=extra)
        self._stop.wait(delay)

    # -- LIST ----------------------------------------------------------------

    def _list(self) -> None:
        store: dict[str, Facts] = {}
        resource_version: str | None = None
        token: str | None = None
        while True:
            response = self._list_call(
                limit=self._page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT),
            )
            try:
                body = orjson.loads(response.data)
            finally:
                response.release_conn()
            if not isinstance(body, dict):
                raise _WatchFailed(f"a LIST of {self.kind} returned {type(body).__name__}")
            for item in body.get("items") or ():
                facts = self._convert(item)
                if facts is not None:
                    store[facts.name] = facts
            metadata = body.get("metadata") or {}
            resource_version = metadata.get("resourceVersion")
            token = metadata.get("continue") or None
            if token is None:
                break
        if not resource_version:
            raise _WatchFailed(f"a LIST of {self.kind} returned no resourceVersion")
        changed = not self._synced or store != self._store
        self._store = store
        with self._lock:
            first = not self._synced
            self._synced = True
            self._resource_version = resource_version
            self._current_at = time.monotonic()
            self._lists += 1
            self._error = None
        if changed:
            self.view = self._freeze(store)
            self._publish()
        if first or self._logged_error is not None:
            self._logged_error = None
            log.info(
                "inventory synced",
                extra={
                    "kind": self.kind,
                    "objects": len(store),
                    "resource_version": resource_version,
                },
            )

    # -- WATCH ---------------------------------------------------------------

    def _watch(self) -> None:
        """Watch until stopped; return normally only when stopping. Raises _Expired."""
        while not self._stop.is_set():
            with self._lock:
                resume_from = self._resume_from or self._resource_version
                self._resume_from = None
            timeout = int(self._watch_timeout * (1 + random.random() / 4))
            log.debug(
                "inventory watch starting",
                extra={"kind": self.kind, "resource_version": resume_from},
            )
            try:
                response = self._list_call(
                    watch=True,
                    allow_watch_bookmarks=True,
                    resource_version=resume_from,
                    timeout_seconds=timeout,
                    _preload_content=False,
                    _request_timeout=(CONNECT_TIMEOUT, timeout + WATCH_READ_MARGIN),
                )
            except ApiException as error:
                if error.status == GONE:
                    raise _Expired(describe_error(error)) from error
                raise
            with self._lock:
                # stop() may have looked for a response to close before this one was kept.
                interrupted = self._interrupt_requested or self._stop.is_set()
                self._interrupt_requested = False
                self._response = None if interrupted else response
            if interrupted:
                _close(response)
                continue
            started = time.monotonic()
            try:
                self._stream(response)
            except (HTTPError, OSError, ValueError):
                # Closed under us by interrupt() or stop(): a normal end. ValueError: a
                # read on the file object that stop() or interrupt() closed.
                with self._lock:
                    interrupted = self._interrupt_requested
                    self._interrupt_requested = False
                if not (interrupted or self._stop.is_set()):
                    raise
            finally:
                with self._lock:
                    self._response = None
                _close(response)
            self._touch()
            self._expired_streak = 0
            if time.monotonic() - started < timeout / 2:
                # Ended long before its timeout (a proxy closing streams, say): do not
                # reconnect in a tight loop.
                self._stop.wait(self._backoff.next())
            else:
                self._backoff.reset()

    def _stream(self, response: Any) -> None:
        for line in split_lines(response.stream(amt=None, decode_content=True)):
            if self._stop.is_set():
                return
            self._apply(orjson.loads(line))

    def _apply(self, event: Any) -> None:
        if not isinstance(event, dict):
            raise _WatchFailed(f"a watch event that is not an object: {event!r:.200}")
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise _WatchFailed(f"a {kind} watch event without an object")
        if kind == "ERROR":
            code = obj.get("code")
            message = f"{code} {obj.get('reason')}: {obj.get('message')}"
            if code == GONE:
                raise _Expired(message)
            raise _WatchFailed(message)
        metadata = obj.get("metadata") or {}
        resource_version = metadata.get("resourceVersion")
        name = metadata.get("name")
        changed = False
        if kind in ("ADDED", "MODIFIED"):
            facts = self._convert(obj)
            if facts is not None:
                changed = self._store.get(facts.name) != facts
                self._store[facts.name] = facts
            elif isinstance(name, str):
                changed = self._store.pop(name, None) is not None
        elif kind == "DELETED":
            if isinstance(name, str):
                changed = self._store.pop(name, None) is not None
        elif kind != "BOOKMARK":
            log.debug("ignoring a watch event", extra={"kind": self.kind, "type": kind})
        if changed:
            self.view = self._freeze(self._store)
            self._publish()
        self._touch(resource_version if isinstance(resource_version, str) else None)
        self._backoff.reset()
        self._logged_error = None
        self._expired_streak = 0

    def _touch(self, resource_version: str | None = None) -> None:
        with self._lock:
            if resource_version:
                self._resource_version = resource_version
            self._current_at = time.monotonic()
            self._error = None

    # -- control from other threads -------------------------------------------

    def interrupt(self, resume_from: str | None = None) -> None:
        with self._lock:
            if resume_from is not None:
                self._resume_from = resume_from
            self._interrupt_requested = True
            response = self._response
        if response is not None:
            _shutdown(response)

    def close_stream(self) -> None:
        with self._lock:
            response = self._response
        if response is not None:
            _shutdown(response)

    def status(self) -> KindStatus:
        with self._lock:
            return KindStatus(
                kind=self.kind,
                synced=self._synced,
                objects=len(self._store),
                current_at=self._current_at,
                resource_version=self._resource_version,
                lists=self._lists,
                last_error=self._error,
            )


def _shutdown(response: Any) -> None:
    """Wake a thread blocked reading ``response``: shut the socket down for reading."""
    try:
        response.shutdown()
    except Exception:
        with contextlib.suppress(Exception):
            response.close()


def _close(response: Any) -> None:
    with contextlib.suppress(Exception):
        response.close()
    with contextlib.suppress(Exception):
        response.release_conn()


def _node_tuple(store: dict[str, NodeFacts]) -> tuple[NodeFacts, ...]:
    return tuple(store[name] for name in sorted(store))


_PriorityClassMap = Mapping[str, PriorityClassFacts]


def _priority_class_map(store: dict[str, PriorityClassFacts]) -> _PriorityClassMap:
    return MappingProxyType(dict(store))


# -- the watcher ---------------------------------------------------------------


class InventoryWatcher:
    """Nodes and PriorityClasses of the cluster behind ``api``, kept current.

    ``api`` is a ``kubernetes.client.ApiClient`` (``webhook.kube.api_client``). Nothing
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
        self._nodes: _Reflector[NodeFacts, tuple[NodeFacts, ...]] = _Reflector(
            NODES,
            core.list_node,
            functools.partial(node_facts, label_keys=node_label_keys),
            _node_tuple,
            backoff=Backoff(cap=relist_backoff_cap),
            **common,
        )
        self._priority_classes: _Reflector[PriorityClassFacts, _PriorityClassMap] = _Reflector(
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

    def _reflectors(self) -> tuple[_Reflector[Any, Any], ...]:
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
