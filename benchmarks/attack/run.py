"""Attack one real `serve` replica the way issue 10 describes, and measure what others see.

    python -m benchmarks.attack [--seconds 60] [--slowloris 500] [--idle 2000]
                                [--stalled 100] [--[no-]reconnect] [--repository DIR]

One replica is started as a subprocess (`python -m webhook.cli serve`, with a test CA),
then, for `--seconds`, an attacker process keeps in flight at once:

- the largest review the server accepts (a Deployment with tens of thousands of
  containers), posted again as soon as it is answered;
- `--slowloris` connections that send half a request head and a header line every 2 s;
- `--idle` TLS connections that never send a byte;
- `--stalled` uploads that declare a 6.5 MiB body, send all but its last byte, and wait.

and, aimed at the policy route and at the per-source bounds:

- `--policy-loops` connections from one address posting the same 250 KB policy to
  `/validate-policy` as fast as they are answered, and as many from another address
  posting a new 250 KB policy each time (each one compiled: 0.36 s);
- `--flood` tasks from one address opening TLS connections as fast as they are accepted
  and closing them at once.

Attackers come from addresses of their own, as tenants' pods would: the connections of
the first four kinds spread over `--sources` loopback addresses (127.1.x.y), the largest
review, the policy loops and the flood each from one (127.2.0.1, 127.3.0.1 and
127.3.0.2, 127.4.0.1). The probes come from 127.0.0.1, kube-apiserver's address here.

Each attacking connection the server closes is replaced a second later (unless
`--no-reconnect`): a persistent attacker, which makes the server pay a TLS handshake
for every connection it cuts off. The attacker process runs at nice 10
(`--attacker-nice`): its CPU would not be the replica's in a cluster, but here they
share two cores.

Meanwhile this process starts a `/healthz` probe and a small review 20 times a
second, and once a second an operator's policy apply (the default policy, a new text each
time, so compiled each time) and a large review (a 213 KB Deployment of 1,000
containers, judged in the worker), whether or not the previous ones were answered (a
stalled server is not probed less), each on an idle keep-alive connection or a new one,
and reports their p50/p99/max latency and statuses, apart for probes that needed a new
connection, and by 10 s. At the end it reads the server's counts of connections cut off
or refused, and of review workers replaced, from /metrics.

Memory. The Deployment's limit is 384 MiB, applied by the container's cgroup. A
cgroup is not ours to create here, and RLIMIT_AS would count reserved address space
(thread stacks, arenas, mmap'd files), not memory, so Python fails long before it uses
the limit. Instead the memory of the server and of its child processes (the review
worker and multiprocessing's resource tracker) is read from /proc/PID/smaps_rollup ten
times a second: summed RSS counts the pages they share (the interpreter, libraries)
once per process, summed PSS splits them among the sharers, which is what a cgroup
would charge for them. PSS is the figure to hold against the limit; RSS is shown as an
upper bound. Both are reported at start (after one largest review), at their peak and
`--settle` seconds after the last attacking connection closed.

`--audit N` runs the replica's periodic audit meanwhile, as a replica in a cluster runs
it: a control plane of etcd and kube-apiserver (``benchmarks.common.cluster``) holds
an opted-in namespace of N ReplicaSets of zero replicas with a 1.2 MB environment value
each (``benchmarks.audit``), and the replica serves with `--kubeconfig` (its live
inventory too) and `--audit-interval 10`; how many audits ran is read from its log.

`--repository DIR` runs the server from another checkout (for figures of older code).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.attack.clients import (
    Tally,
    flood,
    hold,
    idle,
    post_repeatedly,
    slowloris,
    stalled_upload,
    tenant_addresses,
)
from benchmarks.attack.payloads import (
    deployment_review,
    largest_deployment_review,
    largest_judged_deployment_review,
    policy_review,
    policy_text,
    small_review,
)
from benchmarks.common.connection import Connection, Endpoint
from benchmarks.common.replica import (
    REPOSITORY,
    MemorySampler,
    Pki,
    client_context,
    free_port,
    make_pki,
    memory_mib,
    stop_server,
    wait_until_healthy,
)
from webhook.engine.request import MAX_VALUES

LIMIT_MIB = 384
LARGEST_BODY = 7 * 1024 * 1024
STALLED_DECLARED = int(6.5 * 1024 * 1024)
ATTACK_POLICY_BYTES = 250 * 1024
LARGEST_SOURCE, SAME_POLICY_SOURCE, NEW_POLICY_SOURCE, FLOOD_SOURCE = (
    "127.2.0.1",
    "127.3.0.1",
    "127.3.0.2",
    "127.4.0.1",
)


# ------------------------------------------------------------------ the server


def start_server(
    repository: Path,
    pki: Pki,
    port: int,
    log: Path,
    metrics_port: int,
    extra: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "webhook.cli", "serve", "--port", str(port)]
    command += ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key), *extra]
    help_text = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "serve", "--help"],
        cwd=repository,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "--metrics-port" in help_text:
        command += ["--metrics-port", str(metrics_port)]
    env = {**os.environ, "XDG_CACHE_HOME": str(log.parent / "cache")}
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=repository, env=env, stdout=out, stderr=out)


# ------------------------------------------------------------------ the attacker


def largest(which: str) -> bytes:
    """The largest review of its kind: the largest object judged, or the largest body."""
    if which == "judged":
        return largest_judged_deployment_review(MAX_VALUES)
    return largest_deployment_review(LARGEST_BODY)


@dataclass
class AttackReport:
    tallies: dict[str, Tally] = field(default_factory=dict)
    large_seconds: list[float] = field(default_factory=list)


async def review_large_repeatedly(
    endpoint: Endpoint, body: bytes, stop: asyncio.Event, report: AttackReport
) -> None:
    tally = report.tallies.setdefault("largest review", Tally())
    connection = Connection(endpoint)
    while not stop.is_set():
        started = time.monotonic()
        try:
            status = await connection.exchange("POST", "/validate?timeout=10s", body)
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            tally.refused += 1
            await asyncio.sleep(0.1)
            continue
        tally.status(status)
        report.large_seconds.append(time.monotonic() - started)
    connection.close()


def shifted(bodies: Callable[[int], bytes], by: int) -> Callable[[int], bytes]:
    return lambda n: bodies(n + by)


async def attack(args: dict[str, Any], report: AttackReport) -> None:
    endpoint = Endpoint("127.0.0.1", args["port"], client_context(Path(args["ca"])))
    sources = tenant_addresses(max(1, args["sources"]))
    stop = asyncio.Event()
    reviewed = largest(args["largest"])
    tasks = [
        asyncio.create_task(
            review_large_repeatedly(endpoint.sourced(LARGEST_SOURCE), reviewed, stop, report)
        )
    ]
    same = policy_review(policy_text(ATTACK_POLICY_BYTES))
    loops = [
        ("policy loop, same policy", SAME_POLICY_SOURCE, lambda n: same),
        (
            "policy loop, new policies",
            NEW_POLICY_SOURCE,
            lambda n: policy_review(policy_text(ATTACK_POLICY_BYTES, variant=n + 1)),
        ),
    ]
    for name, source, bodies in loops:
        tally = report.tallies.setdefault(name, Tally())
        for index in range(args["policy_loops"]):
            sent = post_repeatedly(
                endpoint.sourced(source),
                tally,
                stop,
                "/validate-policy?timeout=3s",
                shifted(bodies, index * 1_000_000),  # each connection its own policies
            )
            tasks.append(asyncio.create_task(sent))
    flooded = report.tallies.setdefault("flood", Tally())
    for _ in range(args["flood"]):
        tasks.append(asyncio.create_task(flood(endpoint.sourced(FLOOD_SOURCE), flooded, stop)))
    ramp = args["ramp"]
    kinds = [
        ("slowloris", args["slowloris"], lambda t: slowloris(t)),
        ("idle", args["idle"], lambda t: idle(t)),
        (
            "stalled upload",
            args["stalled"],
            lambda t: stalled_upload(t, STALLED_DECLARED, STALLED_DECLARED - 1),
        ),
    ]
    for name, count, behaviour in kinds:
        tally = report.tallies.setdefault(name, Tally())
        for index in range(count):
            delay = ramp * index / max(count, 1)
            sourced = endpoint.sourced(sources[index % len(sources)])
            held = hold(sourced, tally, stop, delay, behaviour(tally), args["reconnect"])
            tasks.append(asyncio.create_task(held))
    await asyncio.sleep(args["seconds"])
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def attacker_process(args: dict[str, Any], results: Any) -> None:
    os.nice(args["nice"])
    report = AttackReport()
    asyncio.run(attack(args, report))
    results.put(report)


# ------------------------------------------------------------------ the probes


@dataclass
class Probe:
    """One probe: when it started (seconds into the attack), how long it took, its
    status (0: no reply) and whether it needed a new connection."""

    at: float
    seconds: float
    status: int
    new_connection: bool


async def probe(port: int, ca: Path, seconds: float, interval: float) -> dict[str, list[Probe]]:
    """Start a probe of each kind every `interval` seconds whether or not the previous
    one was answered (so a stalled server is not probed less), each on an idle
    keep-alive connection of its kind or on a new one."""
    endpoint = Endpoint("127.0.0.1", port, client_context(ca))
    small = small_review()
    large = deployment_review(1000)
    applies = iter(range(10**9))
    requests: dict[str, tuple[str, str, Any, int]] = {
        "/healthz": ("GET", "/healthz", lambda: None, 1),
        "small review": ("POST", "/mutate?timeout=10s", lambda: small, 1),
        "policy apply": (
            "POST",
            "/validate-policy?timeout=3s",
            lambda: policy_review(policy_text(0, variant=-next(applies) - 1)),
            20,
        ),
        "large review": ("POST", "/validate?timeout=10s", lambda: large, 20),
    }
    pools: dict[str, list[Connection]] = {name: [] for name in requests}
    seen: dict[str, list[Probe]] = {name: [] for name in requests}
    began = time.monotonic()

    async def one(name: str) -> None:
        method, path, bodies, _ = requests[name]
        body = bodies()
        connection = pools[name].pop() if pools[name] else Connection(endpoint)
        handshakes = connection.handshakes
        started = time.monotonic()
        try:
            status = await connection.exchange(method, path, body)
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
            status = 0
            connection.close()
        else:
            pools[name].append(connection)
        took = time.monotonic() - started
        seen[name].append(Probe(started - began, took, status, connection.handshakes > handshakes))

    tasks = []
    tick = 0
    while time.monotonic() < began + seconds:
        tasks += [
            asyncio.create_task(one(name))
            for name, (_, _, _, every) in requests.items()
            if tick % every == 0
        ]
        tick += 1
        await asyncio.sleep(interval)
    await asyncio.gather(*tasks)
    for pool in pools.values():
        for connection in pool:
            connection.close()
    return seen


def server_counts(metrics_port: int) -> list[str]:
    """The server's own counts of connections cut off or refused and of review workers
    replaced, from its /metrics."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError as error:
        return [f"/metrics unread: {error}"]
    wanted = ("gpu_admission_connections_cut_total", "gpu_admission_review_worker_restarts_total")
    return [line for line in text.splitlines() if line.startswith(wanted)]


async def warm_up(port: int, ca: Path, body: bytes) -> float:
    """One largest review before measuring, so that start-up costs are not counted."""
    connection = Connection(Endpoint("127.0.0.1", port, client_context(ca)))
    started = time.monotonic()
    await connection.exchange("POST", "/validate", body)
    connection.close()
    return time.monotonic() - started


# ------------------------------------------------------------------ the report


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def milliseconds(samples: list[float]) -> str:
    return (
        f"p50 {percentile(samples, 0.5) * 1e3:8.1f} ms  p99 {percentile(samples, 0.99) * 1e3:8.1f}"
        f" ms  max {max(samples, default=0.0) * 1e3:8.1f} ms  n={len(samples)}"
    )


AUDIT_INTERVAL = 10


@contextlib.contextmanager
def audited_cluster(replica_sets: int, directory: Path) -> Iterator[tuple[str, ...]]:
    """With `replica_sets`, a control plane holding that many tenant-sized ReplicaSets in
    an opted-in namespace, and the flags that make the replica audit it; nothing without."""
    if not replica_sets:
        yield ()
        return
    # Imported here: only --audit needs a control plane and the kubernetes client.
    from benchmarks.audit.run import NAMESPACE, OPT_IN, fill
    from benchmarks.common.cluster import apiserver_only
    from tests.e2e.build_controlplane import ensure_binaries
    from webhook.kube.client import api_client

    cluster = apiserver_only(ensure_binaries(), directory / "cluster")
    cluster.start()
    try:
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("label", "namespace", NAMESPACE, *(f"{k}={v}" for k, v in OPT_IN.items()))
        api = api_client(cluster.kubeconfig)
        fill(api, replica_sets, 1_200_000)
        api.close()
        yield ("--kubeconfig", str(cluster.kubeconfig), "--audit-interval", str(AUDIT_INTERVAL))
    finally:
        cluster.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.attack", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--slowloris", type=int, default=500)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--stalled", type=int, default=100)
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds to open them all")
    parser.add_argument(
        "--sources", type=int, default=100, help="addresses the held connections come from"
    )
    parser.add_argument(
        "--policy-loops", type=int, default=4, help="connections of each policy loop"
    )
    parser.add_argument(
        "--flood", type=int, default=8, help="tasks opening connections from one address"
    )
    parser.add_argument(
        "--audit",
        type=int,
        default=0,
        metavar="N",
        help="run the replica's audit every 10 s over N tenant-sized ReplicaSets meanwhile",
    )
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--probe-interval", type=float, default=0.05)
    parser.add_argument("--repository", type=Path, default=REPOSITORY)
    parser.add_argument(
        "--largest",
        choices=["judged", "body"],
        default="judged",
        help="the review posted again and again: the largest object the engine judges "
        f"({MAX_VALUES:,} JSON values), or the largest body read (7 MiB, refused unread)",
    )
    parser.add_argument(
        "--reconnect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="replace each attacking connection the server closes, a second later",
    )
    parser.add_argument(
        "--attacker-nice",
        type=int,
        default=10,
        help="CPU niceness of the attacker process (its CPU would not be the server's)",
    )
    args = parser.parse_args(argv)

    with (
        tempfile.TemporaryDirectory(prefix="gpu-admission-attack-") as directory,
        audited_cluster(args.audit, Path(directory)) as audit_flags,
    ):
        pki = make_pki(Path(directory))
        port = free_port()
        metrics_port = free_port()
        log = Path(directory) / "server.log"
        server = start_server(args.repository.resolve(), pki, port, log, metrics_port, audit_flags)
        try:
            asyncio.run(wait_until_healthy(port, pki.ca, server))
            first = asyncio.run(warm_up(port, pki.ca, largest(args.largest)))
            time.sleep(2)
            start = memory_mib(server.pid)
            start_main = memory_mib(server.pid, tree=False)[1]
            sampler = MemorySampler(server.pid)
            sampler.start()
            results: Any = multiprocessing.get_context("spawn").Queue()
            attacker_args = {
                "port": port,
                "ca": str(pki.ca),
                "seconds": args.seconds,
                "slowloris": args.slowloris,
                "idle": args.idle,
                "stalled": args.stalled,
                "ramp": args.ramp,
                "nice": args.attacker_nice,
                "largest": args.largest,
                "reconnect": args.reconnect,
                "sources": args.sources,
                "policy_loops": args.policy_loops,
                "flood": args.flood,
            }
            attacker = multiprocessing.get_context("spawn").Process(
                target=attacker_process, args=(attacker_args, results)
            )
            attacker.start()
            seen = asyncio.run(probe(port, pki.ca, args.seconds, args.probe_interval))
            report: AttackReport = results.get(timeout=args.seconds + 120)
            attacker.join()
            time.sleep(args.settle)
            sampler.stopped.set()
            sampler.join()
            after = memory_mib(server.pid)
            after_main = memory_mib(server.pid, tree=False)[1]
            counted = server_counts(metrics_port)
        finally:
            shutdown = stop_server(server)
        server_log = log.read_text("utf-8", errors="replace")

    print(f"server: {args.repository.resolve()}  one replica, limit {LIMIT_MIB} MiB")
    print(
        f"attack: {args.seconds:.0f} s; the largest review ({args.largest}: "
        f"{len(largest(args.largest)):,} bytes) "
        f"repeatedly, {args.slowloris} slowloris, {args.idle} idle TLS, "
        f"{args.stalled} stalled 6.5 MiB uploads (from {args.sources} addresses); "
        + ("each replaced 1 s after the server closed it" if args.reconnect else "none replaced")
        + f"; {args.policy_loops} + {args.policy_loops} policy loops, {args.flood} flooding"
    )
    if args.audit:
        runs = server_log.count('"audit done"')
        print(
            f"audit: every {AUDIT_INTERVAL} s over {args.audit} ReplicaSets of 1.2 MB; "
            f"{runs} runs done"
        )
    print(f"first largest review (warm-up): {first:.2f} s")
    for name, probes in seen.items():
        statuses: dict[int, int] = {}
        for each in probes:
            statuses[each.status] = statuses.get(each.status, 0) + 1
        print(f"{name:>14}: {milliseconds([p.seconds for p in probes])}  statuses {statuses}")
        reused = [p.seconds for p in probes if not p.new_connection]
        fresh = [p.seconds for p in probes if p.new_connection]
        print(f"{'on a kept-alive connection':>40}: {milliseconds(reused)}")
        print(f"{'on a new connection':>40}: {milliseconds(fresh)}")
        for start_at in range(0, int(args.seconds), 10):
            window = [p.seconds for p in probes if start_at <= p.at < start_at + 10]
            print(f"{f'{start_at}-{start_at + 10} s':>40}: {milliseconds(window)}")
    print(f"largest review: {milliseconds(report.large_seconds)}")
    for name, tally in report.tallies.items():
        lifetimes = tally.lifetimes
        print(
            f"{name:>14}: opened {tally.opened}, closed by the server {tally.closed_by_server}"
            f" (lifetime p50 {percentile(lifetimes, 0.5):.1f} s, max "
            f"{max(lifetimes, default=0.0):.1f} s), refused {tally.refused}, "
            f"statuses {tally.statuses}"
        )
    for index, name in enumerate(("RSS", "PSS")):
        print(
            f"{name} (server + children): start {start[index]:.0f} MiB, peak "
            f"{sampler.peak[index]:.0f} MiB, after {after[index]:.0f} MiB ({args.settle:.0f} s "
            f"after the attack); limit {LIMIT_MIB} MiB"
        )
    print(
        f"PSS of the server process alone: start {start_main:.0f} MiB, peak "
        f"{sampler.peak_main:.0f} MiB, after {after_main:.0f} MiB"
    )
    for line in counted:
        print(f"  {line}")
    errors = [line for line in server_log.splitlines() if '"level":"error"' in line]
    tracebacks = server_log.count("Traceback")
    leaks = server_log.count("leaked")
    print(
        f"shutdown on SIGTERM: {shutdown:.1f} s (exit {server.returncode}); server log: "
        f"{len(errors)} error lines, {tracebacks} tracebacks, {leaks} 'leaked' warnings"
    )
    for line in errors[:3]:
        print(f"  {line[:200]}")


if __name__ == "__main__":
    main()
