"""The load of `benchmarks.apiserver`: concurrent pod CREATEs, straight to kube-apiserver.

``creators`` threads each hold one kept-alive HTTPS connection (`http.client`, the
admin client certificate) and POST pods from a shared list until it is used up. The
pods' bodies are serialized beforehand, so a create costs the client one request and
one response. Threads release the GIL while they wait on the socket, which is nearly
all of a create's time; what the client does cost is measured (process CPU time over
the window) and reported, because on a small machine it shares the cores.

A window runs in three steps: every thread opens its connection and creates its share
of the warm-up pods (they also open kube-apiserver's connections to the webhook);
then ``before()`` is called with every thread waiting; then all are released at
once, and the window lasts until the last create is answered, after which
``after()`` is called. Each create's latency is its request-to-response time.
"""

from __future__ import annotations

import http.client
import itertools
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

WORKLOAD_LABEL = "gpu-admission.io/workload"


def benchmark_pod(name: str, workload_class: str = "inference") -> dict[str, Any]:
    """The pod every arm creates: the inference pod of `benchmarks.engine` as a user
    writes it (a class label and one GPU), which gpu-admission mutates and validates."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {WORKLOAD_LABEL: workload_class, "app": "llm-server"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/llm-server:2.1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ]
        },
    }


DRA_TEMPLATE = "one-a100"


def dra_benchmark_pod(name: str) -> dict[str, Any]:
    """The DRA pod of `benchmarks.engine` as a user writes it: the inference pod claiming
    one A100 through the ResourceClaimTemplate ``DRA_TEMPLATE`` instead of a GPU limit."""
    pod = benchmark_pod(name)
    pod["metadata"]["labels"]["app"] = "llm-dra"
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": DRA_TEMPLATE}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return pod


def pod_bodies(prefix: str, count: int, dra: bool = False) -> list[bytes]:
    """`count` pods to create, serialized: the benchmark pod, or its DRA twin."""
    make = dra_benchmark_pod if dra else benchmark_pod
    return [orjson.dumps(make(f"{prefix}-{i:05d}")) for i in range(count)]


@dataclass
class Window:
    """One measured window: how many creates, how long, each one's latency."""

    pods: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    client_cpu_seconds: float = 0.0

    @property
    def created(self) -> int:
        return len(self.latencies)

    @property
    def pods_per_second(self) -> float:
        return self.created / self.seconds if self.seconds > 0 else 0.0


class _Creator(threading.Thread):
    def __init__(
        self,
        connect: Callable[[], http.client.HTTPSConnection],
        path: str,
        warmup: Sequence[bytes],
        work: Sequence[bytes],
        next_index: Callable[[], int],
        ready: threading.Barrier,
        go: threading.Event,
    ) -> None:
        super().__init__(daemon=True)
        self.connect, self.path = connect, path
        self.warmup, self.work, self.next_index = warmup, work, next_index
        self.ready, self.go = ready, go
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.warmup_errors: list[str] = []
        self.connection: http.client.HTTPSConnection | None = None

    def create(self, body: bytes) -> str | None:
        """POST one pod; None when created, else what went wrong."""
        if self.connection is None:
            self.connection = self.connect()
        try:
            self.connection.request(
                "POST",
                self.path,
                body=body,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )
            response = self.connection.getresponse()
            data = response.read()
        except (http.client.HTTPException, OSError) as error:
            self.connection.close()
            self.connection = None
            return f"{type(error).__name__}: {error}"
        if response.status != 201:
            return f"{response.status}: {data[:300].decode(errors='replace')}"
        return None

    def run(self) -> None:
        try:
            for body in self.warmup:
                if (problem := self.create(body)) is not None:
                    self.warmup_errors.append(problem)
        finally:
            self.ready.wait()
        self.go.wait()
        while True:
            index = self.next_index()
            if index >= len(self.work):
                break
            started = time.perf_counter()
            problem = self.create(self.work[index])
            took = time.perf_counter() - started
            if problem is None:
                self.latencies.append(took)
            else:
                self.errors.append(problem)
        if self.connection is not None:
            self.connection.close()


def run_window(
    api_url: str,
    context: ssl.SSLContext,
    namespace: str,
    work: Sequence[bytes],
    warmup: Sequence[bytes],
    creators: int,
    before: Callable[[], None],
    after: Callable[[], None],
    timeout: float = 60.0,
) -> Window:
    """Create the ``warmup`` pods, then ``before()``, then the ``work`` pods as fast as
    ``creators`` threads can, then ``after()``."""
    parsed = urllib.parse.urlsplit(api_url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 443

    def connect() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(host, port, context=context, timeout=timeout)

    path = f"/api/v1/namespaces/{namespace}/pods"
    counter = itertools.count()
    ready = threading.Barrier(creators + 1)
    go = threading.Event()
    threads = [
        _Creator(connect, path, warmup[i::creators], work, counter.__next__, ready, go)
        for i in range(creators)
    ]
    for thread in threads:
        thread.start()
    ready.wait()
    warmup_errors = [e for t in threads for e in t.warmup_errors]
    if warmup_errors:
        go.set()
        for thread in threads:
            thread.join()
        raise RuntimeError(f"warm-up creates failed: {warmup_errors[:3]}")
    before()
    cpu = time.process_time()
    started = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu
    after()
    return Window(
        pods=len(work),
        seconds=seconds,
        latencies=[latency for t in threads for latency in t.latencies],
        errors=[error for t in threads for error in t.errors],
        client_cpu_seconds=cpu,
    )
