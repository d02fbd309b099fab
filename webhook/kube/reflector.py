"""LIST + WATCH of one kind of object into a store of facts, the way a client-go
reflector does it, in a thread of its own.

1. LIST the kind (in pages of ``page_size``), which gives every object and the
   collection's ``resourceVersion``; the store (name -> facts) is replaced by the result.
2. WATCH from that ``resourceVersion`` with bookmarks and a server-side timeout
   (``watch_timeout_seconds``, jittered up to +25 % so that replicas do not reconnect in
   step). Each ADDED / MODIFIED / DELETED event updates the store and the
   ``resourceVersion``; a BOOKMARK only moves the ``resourceVersion``. When the server
   ends the stream (the timeout), the watch resumes from the last ``resourceVersion``;
   a stream that ends long before its timeout is resumed after a back-off. The client's
   read timeout is a little longer than the server's, so a connection that died
   without a FIN or RST is noticed too.
3. A watch that the apiserver answers with 410 Gone ("too old resource version": the
   version was compacted away, or left the watch cache) means events were lost: back to
   1 at once. Any other failure (connection refused or reset, a 5xx, a timeout, a
   garbled stream) is logged once per distinct reason, waited out with an exponential
   back-off (``Backoff``: 0.5 s doubling to a cap, with jitter; reset once a watch
   works again) and followed by a fresh LIST, since events may have been missed. An
   unexpected exception is logged with its traceback and treated the same way: the
   thread never dies.

Objects are never deserialised into the client's models: responses are requested with
``_preload_content=False`` and parsed with ``orjson`` into plain JSON dicts, which
``convert`` turns into the facts kept (``webhook.engine.inventory.node_facts``, say).
The watch stream is one JSON event per line, split by ``split_lines``. Only a change
of the facts calls ``publish``, so the many updates that change none of them (kubelet
status heartbeats) cost a comparison. ``status()`` tells how current the store is:
its age is reset by every LIST, watch event, bookmark and normal end of a watch stream;
the apiserver sends a bookmark about once a minute, so a healthy age stays below about
a minute and a half.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import orjson
from urllib3.exceptions import HTTPError, MaxRetryError, NewConnectionError, ProtocolError

from webhook.errors import GpuAdmissionError
from webhook.kube.api_errors import GONE, ApiException, api_error_message
from webhook.kube.frozen_views import Freezer

__all__ = [
    "Backoff",
    "Expired",
    "KindStatus",
    "Reflector",
    "WatchFailed",
    "describe_error",
    "split_lines",
]

log = logging.getLogger("gpu_admission.inventory")

CONNECT_TIMEOUT = 10.0
"""Seconds to establish a connection to the apiserver."""
LIST_READ_TIMEOUT = 60.0
"""Seconds a LIST page may go without a byte arriving."""
WATCH_READ_MARGIN = 30.0
"""The client's read timeout on a watch exceeds the server-side timeout by this much."""


class Named(Protocol):
    """What the store keeps: facts known by the object's name."""

    @property
    def name(self) -> str: ...


Facts = TypeVar("Facts", bound=Named)
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
    """``nodes``, ``priorityclasses``, ``resourceslices`` or ``deviceclasses``."""
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
    events: int = 0
    """Watch events applied so far (bookmarks included)."""
    changes: int = 0
    """Of those, the events that changed the cache's facts, each publishing a snapshot
    (a change of what the engine does not keep, GPU Feature Discovery's timestamp label
    say, is an event and no change)."""

    def age(self, now: float | None = None) -> float | None:
        """Seconds since the cache was known current, or None if never synced."""
        if self.current_at is None:
            return None
        return max(0.0, (time.monotonic() if now is None else now) - self.current_at)


# -- one kind ---------------------------------------------------------------


class Expired(GpuAdmissionError):
    """The watch's resourceVersion is gone (410): relist."""


class WatchFailed(GpuAdmissionError):
    """An ERROR event other than 410."""


class Reflector(Generic[Facts, View]):
    """LIST + WATCH of one kind into a store of facts; see the module docstring."""

    def __init__(
        self,
        kind: str,
        list_call: Callable[..., Any],
        convert: Callable[[Any], Facts | None],
        freeze: Freezer[Facts, View],
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
        self._freeze: Freezer[Facts, View] = freeze
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
        self._events = 0
        self._changes = 0
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
            except Expired as expired:
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
            expected = (ApiException, HTTPError, OSError, WatchFailed, orjson.JSONDecodeError)
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
                raise WatchFailed(f"a LIST of {self.kind} returned {type(body).__name__}")
            for item in body.get("items") or ():
                facts = self._convert(item)
                if facts is not None:
                    kept = self._store.get(facts.name)
                    store[facts.name] = kept if kept == facts else facts
            metadata = body.get("metadata") or {}
            resource_version = metadata.get("resourceVersion")
            token = metadata.get("continue") or None
            if token is None:
                break
        if not resource_version:
            raise WatchFailed(f"a LIST of {self.kind} returned no resourceVersion")
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
            self.view = self._freeze.whole(store)
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
        """Watch until stopped; return normally only when stopping. Raises Expired."""
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
                    raise Expired(describe_error(error)) from error
                raise
            with self._lock:
                # stop() may have looked for a response to close before this one was kept.
                interrupted = self._interrupt_requested or self._stop.is_set()
                self._interrupt_requested = False
                self._response = None if interrupted else response
            if interrupted:
                close(response)
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
                close(response)
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
            raise WatchFailed(f"a watch event that is not an object: {event!r:.200}")
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            raise WatchFailed(f"a {kind} watch event without an object")
        if kind == "ERROR":
            code = obj.get("code")
            message = f"{code} {obj.get('reason')}: {obj.get('message')}"
            if code == GONE:
                raise Expired(message)
            raise WatchFailed(message)
        metadata = obj.get("metadata") or {}
        resource_version = metadata.get("resourceVersion")
        name = metadata.get("name")
        changed: str | None = None
        if kind in ("ADDED", "MODIFIED"):
            facts = self._convert(obj)
            if facts is not None:
                # Equal facts keep their object: the engine tells what changed between
                # two snapshots by identity (webhook.engine.inventory.changed_nodes).
                if self._store.get(facts.name) != facts:
                    self._store[facts.name] = facts
                    changed = facts.name
            elif isinstance(name, str) and self._store.pop(name, None) is not None:
                changed = name
        elif kind == "DELETED":
            if isinstance(name, str) and self._store.pop(name, None) is not None:
                changed = name
        elif kind != "BOOKMARK":
            log.debug("ignoring a watch event", extra={"kind": self.kind, "type": kind})
        if changed is not None:
            self.view = self._freeze.changed(self._store, changed)
            self._publish()
        self._touch(
            resource_version if isinstance(resource_version, str) else None, changed is not None
        )
        self._backoff.reset()
        self._logged_error = None
        self._expired_streak = 0

    def _touch(self, resource_version: str | None = None, changed: bool | None = None) -> None:
        """The cache is current (at ``resource_version``); ``changed`` is given for a watch
        event applied: whether it changed the facts."""
        with self._lock:
            if changed is not None:
                self._events += 1
                self._changes += changed
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
            shutdown(response)

    def close_stream(self) -> None:
        with self._lock:
            response = self._response
        if response is not None:
            shutdown(response)

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
                events=self._events,
                changes=self._changes,
            )


def shutdown(response: Any) -> None:
    """Wake a thread blocked reading ``response``: shut the socket down for reading."""
    try:
        response.shutdown()
    except Exception:
        with contextlib.suppress(Exception):
            response.close()


def close(response: Any) -> None:
    with contextlib.suppress(Exception):
        response.close()
    with contextlib.suppress(Exception):
        response.release_conn()
