"""A TCP proxy on 127.0.0.1 that can cut every connection through it, on demand.

It forwards bytes unchanged (TLS passes straight through), so a client behind it talks
to the real server; ``sever()`` resets every live connection, as a dropped network
link or a restarted load balancer would, while new connections are still accepted.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``(upstream_host, upstream_port)``."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: set[_Pair] = set()
        self._closed = False
        self.accepted = 0
        """Connections accepted so far."""
        self.severed = 0
        """Connections cut by ``sever()`` so far."""
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
                upstream.settimeout(None)
            except OSError:
                _reset(downstream)
                continue
            pair = _Pair(downstream, upstream)
            with self._lock:
                if self._closed:
                    pair.reset()
                    return
                self.accepted += 1
                self._pairs.add(pair)
            for source, target in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(
                    target=self._pipe,
                    args=(pair, source, target),
                    name="tcp-proxy-pipe",
                    daemon=True,
                ).start()

    def _pipe(self, pair: _Pair, source: socket.socket, target: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        # Pass the end on (a half-close); the last of the two pipes closes both sockets.
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)
        if pair.pipe_done():
            with self._lock:
                self._pairs.discard(pair)
            pair.close()

    @property
    def live(self) -> int:
        """Connections open through the proxy right now."""
        with self._lock:
            return len(self._pairs)

    def sever(self) -> int:
        """Reset every live connection (RST, not a polite FIN); return how many pairs."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
            self.severed += len(pairs)
        for pair in pairs:
            pair.reset()
        return len(pairs)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        self.sever()
        self._thread.join(5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _Pair:
    """A client connection and its connection upstream, piped both ways."""

    def __init__(self, downstream: socket.socket, upstream: socket.socket) -> None:
        self.sockets = (downstream, upstream)
        self._lock = threading.Lock()
        self._running = 2

    def pipe_done(self) -> bool:
        """One pipe finished; True for the second."""
        with self._lock:
            self._running -= 1
            return self._running == 0

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def reset(self) -> None:
        for sock in self.sockets:
            _reset(sock)


def _reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0, which sends RST (no FIN). Shutting down the reading side
    first wakes our own pipe thread blocked in recv on it, and sends nothing."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()
