"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that nothing listens on right now.

    The kernel picks them (bind to port 0). Every socket stays open until all
    ports are picked, so one run never gets the same port twice; another
    process could still take one before the component binds it, a window
    envtest accepts too.
    """
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
