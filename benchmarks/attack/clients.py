"""The four kinds of attacker of the attack benchmark, each keeping its connections up as
a persistent attacker would, over the raw HTTP/1.1 client of `benchmarks.common.connection`
(it does exactly what it says: half a header, a body that stops short).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.common.connection import Connection, Endpoint, request_head

RECONNECT_SECONDS = 1.0
"""How long an attacker waits before replacing a connection the server closed: a
persistent attacker, not a handshake flood (that is a CPU attack of its own)."""


def tenant_addresses(count: int, block: int = 1) -> list[str]:
    """`count` loopback addresses standing for tenants' pods: 127.<block>.x.y."""
    return [f"127.{block}.{n // 250}.{n % 250 + 1}" for n in range(count)]


@dataclass
class Tally:
    """What one kind of attacker saw."""

    opened: int = 0
    closed_by_server: int = 0
    refused: int = 0
    lifetimes: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)

    def status(self, code: int) -> None:
        self.statuses[code] = self.statuses.get(code, 0) + 1


async def hold(
    endpoint: Endpoint,
    tally: Tally,
    stop: asyncio.Event,
    start_delay: float,
    behave: Callable[[asyncio.StreamReader, asyncio.StreamWriter, asyncio.Event], object],
    reconnect: bool = True,
) -> None:
    """Keep one attacking connection up until `stop`: open it, let it misbehave until the
    server closes it, count how long it lived, open another (unless not `reconnect`)."""
    await asyncio.sleep(start_delay)
    while not stop.is_set():
        try:
            reader, writer = await endpoint.connect()
        except (TimeoutError, OSError, ssl.SSLError):
            tally.refused += 1
            await asyncio.sleep(RECONNECT_SECONDS)
            continue
        tally.opened += 1
        opened = time.monotonic()
        try:
            await behave(reader, writer, stop)  # type: ignore[misc]
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.transport.abort()
        if not stop.is_set():
            tally.closed_by_server += 1
            tally.lifetimes.append(time.monotonic() - opened)
            if not reconnect:
                return
            await asyncio.sleep(RECONNECT_SECONDS)


async def until_closed(reader: asyncio.StreamReader, stop: asyncio.Event) -> bytes:
    """Whatever the server sends until it closes the connection, or until `stop`."""
    received = bytearray()
    reading = asyncio.ensure_future(reader.read())
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if reading.done():
        received += reading.result()
    else:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    return bytes(received)


def idle(tally: Tally) -> Callable[..., object]:
    """Open a TLS connection and never send a byte."""

    async def behave(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event
    ) -> None:
        await until_closed(reader, stop)

    return behave


def slowloris(tally: Tally, interval: float = 2.0) -> Callable[..., object]:
    """Start a request and add one header line every `interval` seconds, never ending it."""

    async def behave(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event
    ) -> None:
        writer.write(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
        closed = asyncio.ensure_future(until_closed(reader, stop))
        line = 0
        while not closed.done():
            await asyncio.wait({closed}, timeout=interval)
            if not closed.done():
                line += 1
                writer.write(f"X-Slow-{line}: {'a' * 16}\r\n".encode("ascii"))
        reply = closed.result()
        if reply.startswith(b"HTTP/1.1 "):
            tally.status(int(reply[9:12]))

    return behave


def stalled_upload(tally: Tally, declared: int, sent: int) -> Callable[..., object]:
    """Declare a body of `declared` bytes, send `sent` of them, then wait."""
    chunk = b" " * 65536

    async def behave(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stop: asyncio.Event
    ) -> None:
        writer.write(request_head("POST", "/validate", declared))
        closed = asyncio.ensure_future(until_closed(reader, stop))
        remaining = sent
        while remaining > 0 and not closed.done():
            piece = chunk[: min(len(chunk), remaining)]
            writer.write(piece)
            remaining -= len(piece)
            drained = asyncio.ensure_future(writer.drain())
            await asyncio.wait({drained, closed}, return_when=asyncio.FIRST_COMPLETED)
            if not drained.done():
                drained.cancel()
            elif drained.exception() is not None:
                break  # the server has closed the connection
        reply = await closed
        if reply.startswith(b"HTTP/1.1 "):
            tally.status(int(reply[9:12]))

    return behave


async def flood(endpoint: Endpoint, tally: Tally, stop: asyncio.Event) -> None:
    """Open TLS connections from one address as fast as they are accepted, each closed at
    once: a client that makes the server pay a handshake per connection."""
    while not stop.is_set():
        try:
            _, writer = await asyncio.wait_for(endpoint.connect(), 10)
        except (TimeoutError, OSError, ssl.SSLError, asyncio.IncompleteReadError):
            tally.refused += 1
            await asyncio.sleep(0)
            continue
        tally.opened += 1
        writer.transport.abort()


async def post_repeatedly(
    endpoint: Endpoint,
    tally: Tally,
    stop: asyncio.Event,
    path: str,
    bodies: Callable[[int], bytes],
) -> None:
    """POST ``bodies(n)`` for n = 0, 1, ... on one kept-alive connection, each as soon as
    the previous one is answered (a second after a refusal)."""
    connection = Connection(endpoint)
    sent = 0
    while not stop.is_set():
        try:
            status = await connection.exchange("POST", path, bodies(sent))
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            tally.refused += 1
            await asyncio.sleep(RECONNECT_SECONDS)
            continue
        sent += 1
        tally.opened = connection.handshakes
        tally.status(status)
        if status >= 400:
            await asyncio.sleep(RECONNECT_SECONDS)
    connection.close()
