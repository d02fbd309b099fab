"""The bounds of `webhook.http.limits` on a real uvicorn server, in plain HTTP on
127.0.0.1, with limits of a fraction of a second and raw clients that misbehave."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

from webhook.http.limits import EdgeLimits, guarded_protocol

QUICK = EdgeLimits(
    idle_seconds=1,
    head_seconds=2.0,
    body_seconds=0.5,
    max_head_bytes=1024,
    max_connections=3,
    linger_seconds=0.2,
)
NEVER = 30.0
"""Longer than any limit here: a connection still open after this is never closed."""

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def echo_length(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A tiny ASGI app: reads the whole body and answers its length."""
    if scope["type"] != "http":
        return
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = str(size).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class Running:
    port: int
    server: uvicorn.Server
    cuts: list[str] = field(default_factory=list)

    async def connect(self) -> Streams:
        return await asyncio.open_connection("127.0.0.1", self.port)


@asynccontextmanager
async def serving(limits: EdgeLimits = QUICK, grace: int = 2) -> AsyncIterator[Running]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    cuts: list[str] = []
    config = uvicorn.Config(
        echo_length,
        http=guarded_protocol(limits, cuts.append),
        timeout_keep_alive=limits.idle_seconds,
        timeout_graceful_shutdown=grace,
        lifespan="off",
        log_config=None,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield Running(listener.getsockname()[1], server, cuts)
    finally:
        server.should_exit = True
        await task
        listener.close()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    return await asyncio.wait_for(reader.read(), NEVER)


async def request(streams: Streams, body: bytes = b"abc") -> bytes:
    reader, writer = streams
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), NEVER)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head + await reader.readexactly(length)


def test_a_request_is_answered_within_the_limits() -> None:
    async def scenario() -> None:
        async with serving() as running:
            reply = await request(await running.connect(), b"x" * 100)

        assert reply.startswith(b"HTTP/1.1 200")
        assert reply.endswith(b"\r\n\r\n100")

    run(scenario)


def test_a_connection_that_never_sends_a_byte_is_closed() -> None:
    async def scenario() -> None:
        async with serving() as running:
            reader, _ = await running.connect()

            assert await closed_by_server(reader) == b""
            assert running.cuts == ["idle"]

    run(scenario)


def test_a_request_head_sent_a_line_at_a_time_is_cut_off() -> None:
    async def scenario() -> None:
        async with serving() as running:
            reader, writer = await running.connect()
            writer.write(b"POST / HTTP/1.1\r\n")
            closed = asyncio.ensure_future(closed_by_server(reader))
            for line in range(int(NEVER * 10)):
                if closed.done():
                    break
                writer.write(b"X-Slow-%d: a\r\n" % line)
                await asyncio.sleep(0.1)

            assert closed.done()
            assert running.cuts == ["head_timeout"]

    run(scenario)


def test_a_kept_alive_connection_waits_idle_longer_than_a_head_may_take() -> None:
    """kube-apiserver keeps idle connections 90 s and reuses them; a server that closed
    one sooner would race its next review and fail it."""
    patient = dataclasses.replace(QUICK, idle_seconds=3, head_seconds=0.5)

    async def scenario() -> None:
        async with serving(patient) as running:
            streams = await running.connect()
            first = await request(streams)
            await asyncio.sleep(1.0)  # twice what a head may take, within the idle limit
            second = await request(streams)

            assert first.startswith(b"HTTP/1.1 200")
            assert second.startswith(b"HTTP/1.1 200")
            assert running.cuts == []

    run(scenario)


def test_a_later_head_sent_a_line_at_a_time_is_cut_off_from_its_first_byte() -> None:
    patient = dataclasses.replace(QUICK, idle_seconds=10, head_seconds=0.5)

    async def scenario() -> None:
        async with serving(patient) as running:
            streams = await running.connect()
            await request(streams)
            reader, writer = streams
            writer.write(b"POST / HTTP/1.1\r\n")
            closed = asyncio.ensure_future(closed_by_server(reader))
            for line in range(50):
                if closed.done():
                    break
                writer.write(b"X-Slow-%d: a\r\n" % line)
                await asyncio.sleep(0.1)

            assert closed.done()
            assert running.cuts == ["head_timeout"]

    run(scenario)


def test_a_body_that_stops_short_of_its_length_is_answered_408_and_closed() -> None:
    async def scenario() -> None:
        async with serving() as running:
            reader, writer = await running.connect()
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")

            reply = await closed_by_server(reader)

            assert reply.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
            assert b"connection: close" in reply
            assert running.cuts == ["body_timeout"]

    run(scenario)


def test_a_request_head_over_the_cap_is_answered_431_and_closed() -> None:
    async def scenario() -> None:
        async with serving() as running:
            reader, writer = await running.connect()
            writer.write(b"POST / HTTP/1.1\r\nX-Big: " + b"a" * 2048)

            reply = await closed_by_server(reader)

            assert reply.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
            assert running.cuts == ["head_too_large"]

    run(scenario)


def test_past_the_cap_a_new_connection_closes_the_one_idle_longest() -> None:
    patient = EdgeLimits(idle_seconds=30, head_seconds=30, max_connections=3)

    async def scenario() -> None:
        async with serving(patient) as running:
            oldest = await running.connect()
            older = await running.connect()
            await request(older)  # answered, then idle again
            old = await running.connect()
            await asyncio.sleep(0.1)  # all three are seen by the server in this order

            newest = await running.connect()

            assert (await request(newest)).startswith(b"HTTP/1.1 200")
            assert await closed_by_server(oldest[0]) == b""
            assert (await request(older)).startswith(b"HTTP/1.1 200")
            assert (await request(old)).startswith(b"HTTP/1.1 200")
            assert running.cuts == ["evicted"]

    run(scenario)


def test_past_the_cap_bodies_trickling_in_cannot_lock_new_connections_out() -> None:
    """Stalled bodies would otherwise fill every place: kube-apiserver's next review,
    and every one after, would find none. The body arriving longest is closed."""
    patient = EdgeLimits(body_seconds=30, max_connections=2)
    busy = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234"

    async def scenario() -> None:
        async with serving(patient) as running:
            first = await running.connect()
            first[1].write(busy)  # in the middle of a body
            await asyncio.sleep(0.1)
            second = await running.connect()
            second[1].write(busy)
            await asyncio.sleep(0.1)

            third = await running.connect()

            assert (await request(third)).startswith(b"HTTP/1.1 200")
            assert await closed_by_server(first[0]) == b""
            assert running.cuts == ["evicted"]
            second[1].write(b"56789")
            assert (await second[0].readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")

    run(scenario)


def test_shutdown_closes_idle_connections_without_waiting_out_the_grace_period(
    caplog: pytest.LogCaptureFixture,
) -> None:
    patient = EdgeLimits(idle_seconds=30, head_seconds=30)

    async def scenario() -> None:
        async with serving(patient, grace=2) as running:
            streams = await running.connect()
            await request(streams)
            half_head = await running.connect()
            half_head[1].write(b"GET / HTTP/1.1\r\n")
            await asyncio.sleep(0.1)
        assert await closed_by_server(streams[0]) == b""
        assert await closed_by_server(half_head[0]) == b""

    with caplog.at_level(logging.INFO):
        run(scenario)

    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "timeout graceful shutdown exceeded" not in caplog.text
