"""One real `serve` replica as the benchmarks start it: its test PKI, a free port, waiting
until it is healthy, stopping it, and the memory of it and its child processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.connection import Connection, Endpoint
from webhook.tls.files import write_key_pair
from webhook.tls.pki import create_ca, issue_serving_certificate

REPOSITORY = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Pki:
    ca: Path
    cert: Path
    key: Path


def make_pki(directory: Path) -> Pki:
    ca = create_ca("attack benchmark CA")
    ca_cert, _ = write_key_pair(directory, "ca", ca)
    issued = issue_serving_certificate(
        ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
    )
    cert, key = write_key_pair(directory, "tls", issued)
    return Pki(ca_cert, cert, key)


def process_tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending += children.get(pid, [])
    return found


def memory_mib(root: int, tree: bool = True) -> tuple[float, float]:
    """Summed RSS and PSS of `root` and (with `tree`) its descendants."""
    rss = pss = 0
    for pid in process_tree(root) if tree else [root]:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss / 1024, pss / 1024


class MemorySampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = (0.0, 0.0)
        self.peak_main = 0.0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            rss, pss = memory_mib(self.pid)
            self.peak = (max(self.peak[0], rss), max(self.peak[1], pss))
            self.peak_main = max(self.peak_main, memory_mib(self.pid, tree=False)[1])


def client_context(ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    return context


def stop_server(server: subprocess.Popen[bytes]) -> float:
    """SIGTERM, then SIGKILL after 30 s; how long the server took to stop."""
    stopping = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    return time.monotonic() - stopping


async def wait_until_healthy(port: int, ca: Path, server: subprocess.Popen[bytes]) -> None:
    connection = Connection(Endpoint("127.0.0.1", port, client_context(ca)))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            if await connection.exchange("GET", "/healthz") == 200:
                connection.close()
                return
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            await asyncio.sleep(0.2)
    raise SystemExit("the server did not become healthy")
