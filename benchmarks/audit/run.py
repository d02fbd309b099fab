"""The periodic audit of one real `serve` replica under tenant-sized objects: its memory.

    python -m benchmarks.audit [--counts 40,100] [--value-bytes 1200000]
                               [--repository DIR] [--audit-interval 10]

Issue 22's finding: the audit ran inside each replica and read whole list pages, raw and
parsed, so ReplicaSets of zero replicas carrying a 1.2 MB environment value each (as
any tenant may store) took a replica from about 100 MiB past the chart's 256 MiB limit.

A control plane of etcd and kube-apiserver only is started as the e2e harness starts
it (``benchmarks.common.cluster.apiserver_only``: no controller turns the ReplicaSets
of zero replicas into anything). One opted-in namespace is filled, count after count
of ``--counts``, with ReplicaSets of ``--value-bytes`` of value. For each count one
replica is started (``python -m webhook.cli serve --kubeconfig ... --audit-interval``,
with a test CA, the live inventory on, as in a cluster), and its PSS and RSS (the
process and its children, from /proc/PID/smaps_rollup ten times a second, as
``benchmarks.attack`` reads them: PSS is what a cgroup charges) are reported:

- before: once healthy, before its first audit starts;
- peak: the largest sample from the audit's start to its ``audit done`` log line;
- after: five seconds after the audit ended.

against the Deployment's limit (384 MiB; 256 MiB when the finding was made). The
replica is stopped before the next count.
Then the same audit is run once by the command (``python -m webhook.cli audit
--kubeconfig ... --quiet``, text output), and its peak PSS and RSS reported the same way.
``--repository DIR`` runs the replica and the command from another tree of the project (a ``git
archive`` of an older commit, say) for the figures before a change.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from benchmarks.common.cluster import apiserver_only
from benchmarks.common.replica import (
    MemorySampler,
    free_port,
    make_pki,
    memory_mib,
    stop_server,
    wait_until_healthy,
)
from tests.builders import tenant_replica_set
from tests.e2e.build_controlplane import ensure_binaries
from webhook.kube.client import api_client

LIMIT_MIB = 384
NAMESPACE = "tenant-sized"
OPT_IN = {"gpu-admission.io/enabled": "true"}
AUDIT_DONE = b'"audit done"'
AUDIT_TIMEOUT = 600.0


def fill(api: Any, count: int, value_bytes: int) -> None:
    """The namespace's ReplicaSets made ``count``, adding those missing."""
    apps: Any = client.AppsV1Api(api)
    have = len(apps.list_namespaced_replica_set(NAMESPACE, limit=1000).items)
    for index in range(have, count):
        replica_set = tenant_replica_set(f"big-{index:03}", value_bytes)
        apps.create_namespaced_replica_set(NAMESPACE, replica_set)


def start_replica(
    repository: Path, kubeconfig: Path, work: Path, interval: int
) -> tuple[subprocess.Popen[bytes], Path, int, Path]:
    """The replica, its log, its port and its CA."""
    pki = make_pki(work)
    log = work / "serve.log"
    port = free_port()
    command = [sys.executable, "-m", "webhook.cli", "serve", "--port", str(port)]
    command += ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    command += ["--metrics-port", str(free_port()), "--kubeconfig", str(kubeconfig)]
    command += ["--audit-interval", str(interval)]
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=repository, env=env, stdout=out, stderr=out)
    return server, log, port, pki.ca


def wait_for_line(
    log: Path, needle: bytes, server: subprocess.Popen[bytes], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if needle in log.read_bytes():
            return
        if server.poll() is not None:
            raise SystemExit(f"the replica exited with {server.returncode}; see {log}")
        time.sleep(0.05)
    raise SystemExit(f"no {needle.decode()} in {log} within {timeout:.0f} s")


def measure(
    repository: Path, kubeconfig: Path, work: Path, interval: int
) -> dict[str, tuple[float, float]]:
    """(RSS, PSS) in MiB of one replica before, at the peak of, and after its first audit."""
    started = time.monotonic()
    server, log, port, ca = start_replica(repository, kubeconfig, work, interval)
    try:
        asyncio.run(wait_until_healthy(port, ca, server))
        # settled, and before the audit's first run (``interval`` seconds after start)
        time.sleep(max(0.5, interval - 2.0 - (time.monotonic() - started)))
        before = memory_mib(server.pid)
        sampler = MemorySampler(server.pid)
        sampler.start()
        wait_for_line(log, AUDIT_DONE, server, AUDIT_TIMEOUT)
        sampler.stopped.set()
        sampler.join()
        peak = sampler.peak
        time.sleep(5.0)
        after = memory_mib(server.pid)
    finally:
        stop_server(server)
    return {"before": before, "peak": peak, "after": after}


def measure_command(repository: Path, kubeconfig: Path, work: Path) -> tuple[float, float]:
    """(RSS, PSS) in MiB at the peak of one ``gpu-admission audit`` of the cluster."""
    command = [sys.executable, "-m", "webhook.cli", "audit", "--kubeconfig", str(kubeconfig)]
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
    with (work / "audit.out").open("wb") as out:
        audit = subprocess.Popen(
            [*command, "--quiet"], cwd=repository, env=env, stdout=out, stderr=out
        )
        sampler = MemorySampler(audit.pid, interval=0.05)
        sampler.start()
        code = audit.wait(timeout=AUDIT_TIMEOUT)
        sampler.stopped.set()
        sampler.join()
    if code not in (0, 1):
        raise SystemExit(f"the audit command exited with {code}; see {work / 'audit.out'}")
    return sampler.peak


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.audit", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--counts", default="40,100", help="ReplicaSets, one run per count")
    parser.add_argument("--value-bytes", type=int, default=1_200_000)
    parser.add_argument("--audit-interval", type=int, default=10, help="seconds")
    parser.add_argument("--repository", type=Path, default=Path.cwd())
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.counts.split(",")]
    with tempfile.TemporaryDirectory(prefix="audit-memory-") as scratch:
        work = Path(scratch)
        cluster = apiserver_only(ensure_binaries(), work / "cluster")
        cluster.start()
        try:
            cluster.kubectl("create", "namespace", NAMESPACE)
            labels = [f"{key}={value}" for key, value in OPT_IN.items()]
            cluster.kubectl("label", "namespace", NAMESPACE, *labels)
            api = api_client(cluster.kubeconfig)
            print(f"replica from {args.repository.resolve()}; limit {LIMIT_MIB} MiB (PSS)")
            heads = "  ".join(f"{head:>15}" for head in ("before", "peak", "after"))
            print(f"{'ReplicaSets':>11}  {heads}   (PSS / RSS MiB)")
            for count in counts:
                fill(api, count, args.value_bytes)
                run = work / f"run-{count}"
                run.mkdir()
                figures = measure(args.repository, cluster.kubeconfig, run, args.audit_interval)
                cells = [f"{pss:7.1f} / {rss:5.1f}" for rss, pss in figures.values()]
                over = " OVER THE LIMIT" if figures["peak"][1] > LIMIT_MIB else ""
                print(f"{count:>11}  {'  '.join(cells)}{over}", flush=True)
                rss, pss = measure_command(args.repository, cluster.kubeconfig, run)
                print(f"{'':>11}  the audit command's peak: {pss:.1f} / {rss:.1f}", flush=True)
            api.close()
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
