"""The door of the admission port: a pace of new connections per source address,
kept before the TLS handshake, and a deadline on the handshake itself.

Each new TLS connection costs the server a handshake (a key exchange and a signature,
a millisecond or two of the event loop's one core) before a byte of a request arrives.
A client that reconnects as soon as it is cut off made the server pay 537 of them a
second in the attack benchmark (BENCHMARKS.md), and kube-apiserver's reviews waited
behind them. So the server does its TLS itself, one step later than uvicorn would: the
protocol uvicorn is given (``gated_tls``) sees the accepted TCP connection first and,
once its source address may have one more handshake, wraps uvicorn's HTTP protocol in
the event loop's own TLS protocol (uvloop's, or asyncio's), exactly what uvicorn does
with ``ssl=``.

The allowance is a token bucket per source address (``SourceRate``): ``burst`` new
connections at once, refilled at ``per_second``. A connection past the burst is not cut
but **waits** for its token, unread, up to ``max_wait`` seconds (1 s); only one that
would wait longer is aborted (no handshake, no reply). Every tenant reaches the service
from kube-apiserver's one address, so a cut there fails whichever tenant's review the
connection was opened for, not the tenant whose burst spent the allowance: waiting
slows the burst down instead, and kube-apiserver's API Priority and Fairness, with the
FlowSchema the deployment ships (deploy/base/flowcontrol/flowcontrol.yaml), bounds each tenant's
share of the concurrency that opens connections in the first place. kube-apiserver
keeps its connections alive (90 s idle) and opens new ones only for concurrency it has
not had yet; an attacker from one address costs at most ``per_second`` handshakes a
second and holds at most ``per_second * max_wait`` waiting sockets. Many addresses
together are for the NetworkPolicy to keep out (deploy/README.md).

kube-apiserver's own addresses (``ApiserverSources``: those given with
``--apiserver-source``, and those the ``kubernetes`` Service's EndpointSlice lists) are
never paced, so never cut: its connections carry every tenant's reviews, the burst's and
its victims' alike, and how many it opens is bounded by its own seats, shaped per tenant
by API Priority and Fairness. A cut there would fail another tenant's review; the pace
and its cut are for every other address.

The bucket of an address unused long enough to be full again is forgotten, so the
table holds only recent sources; past ``max_sources`` it is cleared (admitting, rather
than holding, on an unbounded flood of addresses).

A handshake must be done within ``handshake_seconds`` (10 s, like a request head;
asyncio's own is 60 s), or the connection is closed.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import functools
import ipaddress
import logging
import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("gpu_admission.http")

EARLY_BYTES = 64 * 1024
"""Most a waiting connection's peer may send before its turn."""

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
        return self.reserve(source, 0.0) == 0.0

    def reserve(self, source: str, max_wait: float) -> float | None:
        """Take a token of ``source``'s bucket, there now or the next to come: the seconds
        until it is there (0.0 at once), or None, taking nothing, when that is over
        ``max_wait``. Tokens reserved ahead leave the bucket in debt, so the connections
        waiting on one source are served in turn at ``per_second``."""
        now = self.clock()
        tokens, then = self._buckets.get(source, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.per_second)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.per_second
        if wait > max_wait:
            self._buckets[source] = (tokens, now)
            return None
        if source not in self._buckets and len(self._buckets) >= self.max_sources:
            self._forget_full(now)
        self._buckets[source] = (tokens - 1.0, now)
        return wait

    def _forget_full(self, now: float) -> None:
        self._buckets = {
            source: (tokens, then)
            for source, (tokens, then) in self._buckets.items()
            if now - then < (self.burst - tokens) / self.per_second
        }
        if len(self._buckets) >= self.max_sources:
            self._buckets.clear()

    def __len__(self) -> int:
        return len(self._buckets)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def source_network(text: str) -> Network:
    """The network of an address or CIDR (``10.0.0.1``, ``10.0.0.0/24``, ``fd00::/64``);
    ValueError, saying what was given, for anything else."""
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address or CIDR") from None


class ApiserverSources:
    """kube-apiserver's addresses: those configured, and those learned from the cluster
    (``learn``, replaced at each look). A connection from one is never paced."""

    def __init__(self, configured: Iterable[str] = ()) -> None:
        self.configured: tuple[Network, ...] = tuple(source_network(c) for c in configured)
        self.learned: frozenset[str] = frozenset()

    def learn(self, addresses: Iterable[str]) -> None:
        """The addresses the cluster lists for kube-apiserver now (unparsable ones left out)."""
        found = set()
        for address in addresses:
            try:
                found.add(str(ipaddress.ip_address(address)))
            except ValueError:
                continue
        self.learned = frozenset(found)

    def __contains__(self, source: str) -> bool:
        if source in self.learned:
            return True
        if not self.configured:
            return False
        try:
            address = ipaddress.ip_address(source.split("%", 1)[0])
        except ValueError:
            return False
        mapped = getattr(address, "ipv4_mapped", None)
        return any(address in n or (mapped is not None and mapped in n) for n in self.configured)


NO_SOURCES = ApiserverSources()


class CutsLogged:
    """A connection cut for rate is logged with its source, at most once a minute per
    source (and for at most ``max_sources`` sources a minute): an operator whose
    kube-apiserver reaches the service from an address it does not advertise sees it."""

    def __init__(self, max_sources: int = 64, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_sources = max_sources
        self.clock = clock
        self._logged: dict[str, float] = {}

    def note(self, source: str) -> None:
        now = self.clock()
        self._logged = {s: at for s, at in self._logged.items() if now - at < 60.0}
        if source in self._logged or len(self._logged) >= self.max_sources:
            return
        self._logged[source] = now
        log.warning(
            "new connections cut for rate: if this address is kube-apiserver's, give it "
            "with --apiserver-source (the chart's networkPolicy.webhookSources)",
            extra={"source": source},
        )


CUTS_LOGGED = CutsLogged()


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
        max_wait: float = 0.0,
        on_delayed: Callable[[], None] | None = None,
        apiserver: ApiserverSources = NO_SOURCES,
    ) -> None:
        self.apiserver = apiserver
        self.http = http
        self.context = context
        self.rate = rate
        self.handshake_seconds = handshake_seconds
        self.on_refused = on_refused
        self.max_wait = max_wait
        self.on_delayed = on_delayed
        self._waiting: asyncio.TimerHandle | None = None
        self._transport_waiting: asyncio.Transport | None = None
        self._early = bytearray()
        """What the peer sent while its connection waited (uvloop may read once before
        reading is paused): handed to TLS when its turn comes."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        source = str(peer[0]) if peer else ""
        if source in self.apiserver:
            self._hand_over(transport)
            return
        wait = self.rate.reserve(source, self.max_wait)
        if wait is None:
            transport.abort()
            CUTS_LOGGED.note(source)
            if self.on_refused is not None:
                self.on_refused(SOURCE_RATE)
            return
        if wait == 0.0:
            self._hand_over(transport)
            return
        # Its turn comes later: nothing is read (the ClientHello waits in the socket's
        # buffer) and no handshake is done until then.
        transport.pause_reading()
        loop = asyncio.get_running_loop()
        self._transport_waiting = transport
        self._waiting = loop.call_later(wait, self._turn_come, transport)
        if self.on_delayed is not None:
            self.on_delayed()

    def data_received(self, data: bytes) -> None:
        """Bytes that came before the connection's turn: kept for its handshake, up to
        EARLY_BYTES (a ClientHello is a few hundred); a peer sending more is cut."""
        self._early += data
        if len(self._early) > EARLY_BYTES and self._transport_waiting is not None:
            self._transport_waiting.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        """The peer went away while its connection waited: its turn is given up."""
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def _turn_come(self, transport: asyncio.Transport) -> None:
        self._waiting = self._transport_waiting = None
        if transport.is_closing():
            return
        tls = self._hand_over(transport)
        if self._early:
            _feed(tls, bytes(self._early))
            self._early.clear()
        transport.resume_reading()

    def _hand_over(self, transport: asyncio.Transport) -> Any:
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
        return tls


def _feed(tls: Any, data: bytes) -> None:
    """Give the TLS protocol (a buffered protocol, uvloop's or asyncio's) bytes read
    before it was the transport's protocol."""
    view = memoryview(data)
    while view:
        buffer = tls.get_buffer(len(view))
        size = min(len(buffer), len(view))
        buffer[:size] = view[:size]
        tls.buffer_updated(size)
        view = view[size:]


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
    *,
    max_wait: float = 0.0,
    on_delayed: Callable[[], None] | None = None,
    apiserver: ApiserverSources = NO_SOURCES,
) -> Callable[..., TlsGate]:
    """The protocol factory to give uvicorn as ``Config(http=...)``, with ``ssl`` unset:
    uvicorn's arguments go to ``http``, TLS is served from ``context`` (the very object
    the certificate reloader swaps pairs into). A connection past its source's allowance
    waits up to ``max_wait`` seconds for its turn (``on_delayed`` is told), and is
    refused past that (``on_refused``); one from `apiserver` is never paced."""

    def gate(**arguments: Any) -> TlsGate:
        return TlsGate(
            functools.partial(http, **arguments),
            context,
            rate,
            handshake_seconds,
            on_refused,
            max_wait,
            on_delayed,
            apiserver,
        )

    return gate
