"""The door of the admission port: a bound on new connections per source address,
applied before the TLS handshake, and a deadline on the handshake itself.

Each new TLS connection costs the server a handshake (a key exchange and a signature,
a millisecond or two of the event loop's one core) before a byte of a request arrives.
A client that reconnects as soon as it is cut off made the server pay 537 of them a
second in the attack benchmark (BENCHMARKS.md), and kube-apiserver's reviews waited
behind them. So the server does its TLS itself, one step later than uvicorn would: the
protocol uvicorn is given (``gated_tls``) sees the accepted TCP connection first,
refuses it by aborting it (no handshake, no reply) when its source address has spent
its allowance, and otherwise wraps uvicorn's HTTP protocol in the event loop's own TLS
protocol (uvloop's, or asyncio's), exactly what uvicorn does with ``ssl=``.

The allowance is a token bucket per source address (``SourceRate``): ``burst`` new
connections at once, refilled at ``per_second``. kube-apiserver keeps its connections
alive (90 s idle) and opens new ones only for concurrency it has not had yet, so a
burst of 200 and 50 a second leave it room for any burst of pod creations; an attacker
from one address costs at most 50 handshakes a second. Many addresses together are for
the NetworkPolicy to keep out (deploy/README.md). The bucket of an address unused long
enough to be full again is forgotten, so the table holds only recent sources; past
``max_sources`` it is cleared (admitting, rather than holding, on an unbounded flood of
addresses).

A handshake must be done within ``handshake_seconds`` (10 s, like a request head;
asyncio's own is 60 s), or the connection is closed.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import functools
import ssl
import time
from collections.abc import Callable
from typing import Any

SOURCE_RATE = "source_rate"
"""Why a new connection was refused: what ``on_refused`` is told."""

try:  # the TLS protocol of uvloop's loop, when it is the loop
    import uvloop
    import uvloop.loop
except ImportError:  # pragma: no cover - uvloop is a dependency of uvicorn[standard]
    uvloop = None  # type: ignore[assignment]


class SourceRate:
    """A token bucket per source address."""

    def __init__(
        self,
        per_second: float,
        burst: int,
        max_sources: int = 65536,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self.max_sources = max_sources
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        """Tokens left and when they were counted, by source."""

    def admit(self, source: str) -> bool:
        """Take a token of ``source``'s bucket; False when it has none left."""
        now = self.clock()
        tokens, then = self._buckets.get(source, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.per_second)
        if tokens < 1.0:
            self._buckets[source] = (tokens, now)
            return False
        if source not in self._buckets and len(self._buckets) >= self.max_sources:
            self._forget_full(now)
        self._buckets[source] = (tokens - 1.0, now)
        return True

    def _forget_full(self, now: float) -> None:
        full_after = self.burst / self.per_second
        self._buckets = {
            source: bucket
            for source, bucket in self._buckets.items()
            if now - bucket[1] < full_after
        }
        if len(self._buckets) >= self.max_sources:
            self._buckets.clear()

    def __len__(self) -> int:
        return len(self._buckets)


class TlsGate(asyncio.Protocol):
    """The first protocol of an accepted connection: refuses it, or hands it over to TLS
    and, once the handshake is done, to the HTTP protocol."""

    def __init__(
        self,
        http: Callable[[], asyncio.Protocol],
        context: ssl.SSLContext,
        rate: SourceRate,
        handshake_seconds: float,
        on_refused: Callable[[str], None] | None,
    ) -> None:
        self.http = http
        self.context = context
        self.rate = rate
        self.handshake_seconds = handshake_seconds
        self.on_refused = on_refused

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        source = str(peer[0]) if peer else ""
        if not self.rate.admit(source):
            transport.abort()
            if self.on_refused is not None:
                self.on_refused(SOURCE_RATE)
            return
        loop = asyncio.get_running_loop()
        tls = _tls_protocol(loop)(
            loop,
            self.http(),
            self.context,
            None,
            server_side=True,
            ssl_handshake_timeout=self.handshake_seconds,
        )
        transport.set_protocol(tls)
        tls.connection_made(transport)


def _tls_protocol(loop: asyncio.AbstractEventLoop) -> Any:
    if uvloop is not None and isinstance(loop, uvloop.Loop):
        return uvloop.loop.SSLProtocol  # type: ignore[attr-defined]
    return asyncio.sslproto.SSLProtocol


def gated_tls(
    http: Callable[..., asyncio.Protocol],
    context: ssl.SSLContext,
    rate: SourceRate,
    handshake_seconds: float,
    on_refused: Callable[[str], None] | None = None,
) -> Callable[..., TlsGate]:
    """The protocol factory to give uvicorn as ``Config(http=...)``, with ``ssl`` unset:
    uvicorn's arguments go to ``http``, TLS is served from ``context`` (the very object
    the certificate reloader swaps pairs into)."""

    def gate(**arguments: Any) -> TlsGate:
        return TlsGate(
            functools.partial(http, **arguments), context, rate, handshake_seconds, on_refused
        )

    return gate
