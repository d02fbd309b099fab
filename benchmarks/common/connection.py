"""A minimal HTTP/1.1 client over TLS: one keep-alive connection to the server under test.

A raw client is used rather than httpx so that an attacker does exactly what it says
(half a header, a body that stops short) and so that its own overhead stays small next
to the server it measures; the replica's health checks use it too.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass


@dataclass
class Endpoint:
    """The server, as reached from ``source`` (a loopback address of its own stands for a
    pod's address, or for kube-apiserver's: 127.0.0.1)."""

    host: str
    port: int
    context: ssl.SSLContext
    source: str | None = None

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection(
            self.host,
            self.port,
            ssl=self.context,
            server_hostname="localhost",
            local_addr=None if self.source is None else (self.source, 0),
        )

    def sourced(self, source: str) -> Endpoint:
        return Endpoint(self.host, self.port, self.context, source)


def request_head(method: str, path: str, length: int | None = None) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Accept: application/json"]
    if length is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Status and body of one response framed by Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return status, await reader.readexactly(length)


class Connection:
    """One keep-alive connection that reconnects once when the server has closed it."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.handshakes = 0

    async def exchange(self, method: str, path: str, body: bytes | None = None) -> int:
        for attempt in range(2):
            if self._streams is None:
                self._streams = await self.endpoint.connect()
                self.handshakes += 1
            reader, writer = self._streams
            try:
                writer.write(request_head(method, path, None if body is None else len(body)))
                if body is not None:
                    writer.write(body)
                await writer.drain()
                status, _ = await read_response(reader)
                return status
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].transport.abort()
            self._streams = None
