"""Bounds on every connection of the HTTP server, in time and in space.

uvicorn closes a keep-alive connection left idle after a response, and nothing else:
a connection that never sends a byte, a request head sent one line every few seconds,
or a body that stops short of its Content-Length is waited on for ever, and there is no
cap on connections or on the size of a head. The subclass of uvicorn's httptools
protocol below adds what Go's ``http.Server`` calls IdleTimeout, ReadHeaderTimeout,
ReadTimeout and MaxHeaderBytes, and a connection cap:

- **idle**: a kept-alive connection that sends no byte of its next request for
  ``idle_seconds`` is closed (uvicorn's own timer). This must be longer than the
  90 s kube-apiserver's client keeps an idle connection: a server that closes first
  races the client's next request on that connection, and kube-apiserver fails the
  review rather than send a POST again, so a pod create fails;
- **head**: a new connection's first request head must be complete
  ``head_seconds`` after the connection opened (one that never speaks is closed
  then), a later head ``head_seconds`` after its first byte; a head holds at most
  ``max_head_bytes`` (else 431);
- **body**: a body must be complete ``body_seconds`` after its head (else 408);
- **connections**: past ``max_connections``, a new connection closes those that have
  waited longest for a request (idle keep-alive connections, slow heads), as nginx
  reuses idle keep-alive connections, then those whose body has been arriving longest;
  only when every connection holds a request being judged is the new one closed
  instead. So neither idle connections nor stalled bodies can lock kube-apiserver out.

A connection cut off without a reply (idle, slow head, evicted) is aborted at once.
Every other connection the server closes (with a 408 or 431 from here, or closed by
uvicorn after a ``connection: close`` reply or a malformed request) stops being read
and is aborted ``linger_seconds`` later if it has not gone by then: over TLS a close
waits up to 30 s for the peer's close_notify, which an attacker never sends, while
what the peer keeps sending is still decrypted, only to be dropped.

On shutdown, connections waiting for a request are aborted at once, so that ``serve``
stops in a moment instead of waiting out its grace period.

TLS handshakes happen before this protocol sees the connection: ``webhook.http.tls_gate``
paces them (``new_connections_per_second`` and ``new_connection_burst`` per source
address, a connection past them waiting up to ``new_connection_wait_seconds`` for its
turn before its handshake, refused past that; ``handshake_seconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("gpu_admission.http")


@dataclass(frozen=True)
class EdgeLimits:
    idle_seconds: int = 120
    """Longer than kube-apiserver's 90 s (Go's ``http.Transport`` IdleConnTimeout), so
    the client always closes an idle connection first. Idle connections are bounded by
    ``max_connections`` (the longest idle is evicted first), not by time."""
    head_seconds: float = 10.0
    body_seconds: float = 10.0
    """kube-apiserver sends a whole review in one go; 10 s is 7 MiB at under 1 MB/s."""
    max_head_bytes: int = 16 * 1024
    """kube-apiserver's heads are a few hundred bytes."""
    max_connections: int = 512
    """About 45 KiB each over TLS: at most 23 MiB of idle connections."""
    linger_seconds: float = 1.0
    handshake_seconds: float = 10.0
    """A TLS handshake not done by then is closed (asyncio's own deadline is 60 s)."""
    new_connections_per_second: float = 50.0
    """New connections one source address may open a second, after its burst; past that
    they wait for their turn (``webhook.http.tls_gate``)."""
    new_connection_burst: int = 200
    """New connections one source address may open at once."""
    new_connection_wait_seconds: float = 1.0
    """How long a connection past its source's allowance may wait for its turn before it
    is closed instead: well inside the webhooks' 3 s timeout, which it counts against."""
    apiserver_sources: tuple[str, ...] = ()
    """kube-apiserver's addresses or CIDRs, never paced (``webhook.http.tls_gate``); those
    the cluster lists for it are learned besides."""


#: Why a connection was cut off: what ``on_cut`` is told.
IDLE, HEAD_TIMEOUT, HEAD_TOO_LARGE, BODY_TIMEOUT, EVICTED, NO_ROOM = (
    "idle",
    "head_timeout",
    "head_too_large",
    "body_timeout",
    "evicted",
    "no_room",
)
CUT_REASONS = (IDLE, HEAD_TIMEOUT, HEAD_TOO_LARGE, BODY_TIMEOUT, EVICTED, NO_ROOM)


def _reply(status: str, message: str) -> bytes:
    body = message.encode("ascii")
    head = f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n"
    head += f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode("ascii") + body


HEAD_TOO_LARGE_REPLY = _reply("431 Request Header Fields Too Large", "request head too large")
BODY_TIMEOUT_REPLY = _reply("408 Request Timeout", "request body not received in time")


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds above (see ``guarded_protocol``)."""

    limits: ClassVar[EdgeLimits] = EdgeLimits()
    cut_listeners: ClassVar[tuple[Callable[[str], None], ...]] = ()
    """Told the reason of each connection cut off (for metrics)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._lingering = False
        #: Since when the connection waits for (the rest of) a request head; None while a
        #: request is received or answered.
        self.waiting_since: float | None = None
        #: When the body of the request in flight began, while it is still arriving.
        self.receiving_since: float | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        if len(self.connections) > self.limits.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.waiting_since is not None:
            if self._deadline is None:  # the first byte of a head on a kept-alive connection
                self._arm(self.limits.head_seconds, self._head_expired)
            self._head_bytes += len(data)
        super().data_received(data)
        if self.transport.is_closing():  # uvicorn refused a malformed request
            self._linger()
        elif self.waiting_since is not None and self._head_bytes > self.limits.max_head_bytes:
            self._cut(HEAD_TOO_LARGE, HEAD_TOO_LARGE_REPLY)

    def on_headers_complete(self) -> None:
        self.waiting_since = None
        self.receiving_since = time.monotonic()
        self._arm(self.limits.body_seconds, self._body_expired)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.receiving_since = None
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if self.transport.is_closing():  # a `connection: close` reply
            self._linger()
        elif not pipelined:
            self._await_request(first=False)

    def timeout_keep_alive_handler(self) -> None:
        self._cut(IDLE)

    def shutdown(self) -> None:
        if self.waiting_since is not None:
            self._disarm()
            self.transport.abort()
        else:
            super().shutdown()

    def _await_request(self, first: bool = True) -> None:
        """Wait for a request head: a new connection's within ``head_seconds``; on a
        kept-alive one, the head clock starts with its first byte (idle until then)."""
        self.waiting_since = time.monotonic()
        self._head_bytes = 0
        if first:
            self._arm(self.limits.head_seconds, self._head_expired)
        else:
            self._disarm()

    def _head_expired(self) -> None:
        self._cut(HEAD_TIMEOUT)

    def _body_expired(self) -> None:
        answered = self.cycle is not None and self.cycle.response_started
        self._cut(BODY_TIMEOUT, b"" if answered else BODY_TIMEOUT_REPLY)

    def _make_room(self) -> None:
        live = [c for c in self.connections if not c.transport.is_closing()]
        excess = len(live) - self.limits.max_connections
        if excess <= 0:
            return
        others = [c for c in live if isinstance(c, GuardedHttpToolsProtocol) and c is not self]
        # Idle first, longest idle first; then bodies still arriving, the slowest first:
        # kube-apiserver sends a review in one go, so a body that has been trickling in
        # longest is the likeliest to be stalled on purpose. Never a review being judged.
        waiting = sorted(
            (c for c in others if c.waiting_since is not None),
            key=lambda c: c.waiting_since or 0.0,
        )
        receiving = sorted(
            (c for c in others if c.receiving_since is not None),
            key=lambda c: c.receiving_since or 0.0,
        )
        evictable = waiting + receiving
        for connection in evictable[:excess]:
            connection._cut(EVICTED)
        if len(evictable) < excess:
            self._cut(NO_ROOM)

    def _cut(self, reason: str, reply: bytes = b"") -> None:
        self._disarm()
        self._unset_keepalive_if_required()
        transport = self.transport
        if transport.is_closing():
            return
        log.debug("connection cut off", extra={"reason": reason, "client": self.client})
        for listener in self.cut_listeners:
            listener(reason)
        if not reply:
            transport.abort()  # nothing to say: free it now, not after a TLS goodbye
            return
        transport.write(reply)
        transport.close()
        self._linger()

    def _linger(self) -> None:
        """Read no more of a closing connection, and abort it if it is not gone soon."""
        if self._lingering:
            return
        self._lingering = True
        self._disarm()
        with contextlib.suppress(RuntimeError, AttributeError):
            self.transport.pause_reading()
        self.loop.call_later(self.limits.linger_seconds, self.transport.abort)

    def _arm(self, seconds: float, expired: Callable[[], None]) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def guarded_protocol(
    limits: EdgeLimits, on_cut: Callable[[str], None] | None = None
) -> type[GuardedHttpToolsProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``): ``limits`` on every
    connection, ``on_cut(reason)`` called for each connection cut off."""
    attributes = {"limits": limits, "cut_listeners": () if on_cut is None else (on_cut,)}
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), attributes)
