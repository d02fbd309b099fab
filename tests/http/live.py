"""A real uvicorn server of an ASGI app on 127.0.0.1 for the edge's tests, and raw
clients that can come from another loopback address (127.0.0.2, ...), as tenants' pods
come from addresses other than kube-apiserver's."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn

from webhook.http.limits import EdgeLimits, guarded_protocol

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
KUBE_APISERVER = "127.0.0.1"
NEVER = 30.0
"""Longer than any bound of these tests: what is not over by then never will be."""


@dataclass
class Live:
    port: int
    server: uvicorn.Server
    tls: ssl.SSLContext | None = None

    async def connect(self, source: str = KUBE_APISERVER) -> Streams:
        return await asyncio.open_connection(
            "127.0.0.1",
            self.port,
            local_addr=(source, 0),
            ssl=self.tls,
            server_hostname="localhost" if self.tls is not None else None,
        )


@asynccontextmanager
async def live(
    app: Any,
    limits: EdgeLimits | None = None,
    protocol: Any = None,
) -> AsyncIterator[Live]:
    """``app`` served in plain HTTP with ``limits`` (or by ``protocol``) until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    bounds = limits or EdgeLimits()
    config = uvicorn.Config(
        app,
        http=protocol or guarded_protocol(bounds),
        timeout_keep_alive=bounds.idle_seconds,
        timeout_graceful_shutdown=1,
        lifespan="off",
        log_config=None,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield Live(listener.getsockname()[1], server)
    finally:
        server.should_exit = True
        await task
        listener.close()


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(scenario(), 60))


def post(path: str, body: bytes, declared: int | None = None) -> bytes:
    """A POST of ``body`` declaring ``declared`` bytes (its length unless given)."""
    length = len(body) if declared is None else declared
    head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {length}\r\n\r\n"
    return head.encode("ascii") + body


async def reply(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of the next response."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), NEVER)
    status = int(head.split(b" ", 2)[1])
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return status, await asyncio.wait_for(reader.readexactly(length), NEVER)


async def exchange(streams: Streams, request: bytes) -> tuple[int, bytes]:
    reader, writer = streams
    writer.write(request)
    return await reply(reader)
