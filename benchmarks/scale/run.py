"""One replica at the scale of the largest GPU clusters, on a real control plane with
simulated nodes.

    python -m benchmarks.scale [--nodes 1000,2500,5000] [--pods-per-node 20]
                               [--churn-rate 50] [--review-rate 50] [--seconds 20]
                               [--connections 8] [--tiny]

etcd and kube-apiserver are started as the e2e harness starts them
(``benchmarks.common.cluster.apiserver_only``: no scheduler binds the pods, no
controller watches anything). The cluster is grown size after size of ``--nodes``:
GPU nodes labelled as GPU Feature Discovery labels them, each with the ResourceSlice
NVIDIA's DRA driver publishes for it (``benchmarks.scale.fleet``), and
``--pods-per-node`` pods per node, never scheduled, in opted-in namespaces of 200
pods each, all written over ``--connections`` concurrent connections. At each size:

1. sync: one replica is started (``python -m webhook.cli serve --kubeconfig ...``, a
   test CA, the live inventory on, its periodic audit off, the default policy with
   both pools taking GPUs through the device plugin and DRA so that it watches every
   kind it can); the time from its start to ``/readyz`` saying every kind synced, its
   peak PSS meanwhile and its PSS once settled (the process and its children, from
   /proc/PID/smaps_rollup as ``benchmarks.attack`` reads them: PSS is what a cgroup
   charges);
2. idle: a class pod's CREATE reviewed (``/mutate``, then ``/validate`` with the
   mutated pod, as kube-apiserver sends them; ``benchmarks.service.bodies``) at
   ``--review-rate`` for ``--seconds`` over HTTPS: p50 and p99 of the pair, each timed
   from when it was due, so that a stall counts against the reviews it delays;
3. churn: the same while ``--churn-rate`` node changes a second reach kube-apiserver
   (labels, then status.allocatable's GPUs, alternating, node after node), which the
   replica's watches follow: p99 under churn against idle, and its peak PSS;
4. audit: the replica stopped, the audit run once by the command (``python -m
   webhook.cli audit --kubeconfig ... --quiet``, text output): wall time, peak PSS, and
   the requests it made to kube-apiserver by verb and resource (``apiserver_request_total``
   of kube-apiserver's /metrics before and after; a pod LIST request is one page).

Each figure is printed with the load average when it was taken; then the targets
(replica memory under the chart's limit with room to spare, sync under 30 s, review p99
under churn within 2 times idle, the audit's memory flat in the pod count) met or
missed, and the chart values to set when a replica's memory at the
largest size is past 75% of the chart's limit. ``--tiny`` is a quick run of the whole
path (20 nodes, 200 pods, 3-second windows).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import http.client
import math
import multiprocessing
import os
import platform
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from benchmarks.attack.run import start_server
from benchmarks.common.cluster import Api, ApiError, apiserver_only
from benchmarks.common.replica import (
    REPOSITORY,
    MemorySampler,
    free_port,
    make_pki,
    memory_mib,
    stop_server,
    wait_until_healthy,
)
from benchmarks.common.report import this_cpu_model
from benchmarks.scale import fleet
from benchmarks.scale.report import (
    Latency,
    SizeFigures,
    chart_values,
    full_collections,
    node_event_counts,
    request_counts,
    request_delta,
    request_lines,
    table,
    verdicts,
)
from benchmarks.service.bodies import mutate_body, patch_of, validate_body
from tests.e2e.build_controlplane import bin_dir, ensure_binaries
from tests.e2e.controlplane import ControlPlane

PODS_PER_NAMESPACE = 200
SYNC_TIMEOUT = 600.0
AUDIT_TIMEOUT = 3600.0
MERGE_PATCH = "application/merge-patch+json"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


# -- writing the cluster ---------------------------------------------------------------


class Writers:
    """``connections`` threads, each with its own kept-alive admin connection."""

    def __init__(self, cluster: ControlPlane, connections: int) -> None:
        self.url, self.context = cluster.api_url, cluster.admin_ssl_context()
        self.local = threading.local()
        self.clients: list[Api] = []
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=connections, thread_name_prefix="writer")

    def api(self) -> Api:
        api: Api | None = getattr(self.local, "api", None)
        if api is None:
            api = self.local.api = Api(self.url, self.context)
            with self.lock:
                self.clients.append(api)
        return api

    def run(self, work: Callable[[Api, int], None], indices: range) -> None:
        """``work(api, index)`` for every index, over the connections; the first error
        is raised."""
        for future in [self.pool.submit(self.call, work, index) for index in indices]:
            future.result()

    def call(self, work: Callable[[Api, int], None], index: int) -> None:
        work(self.api(), index)

    def close(self) -> None:
        self.pool.shutdown(wait=True)
        for api in self.clients:
            api.close()


def create_node(api: Api, index: int) -> None:
    now = datetime.datetime.now(datetime.UTC)
    api.call("POST", "/api/v1/nodes", fleet.node_object(index, now), ok=(201, 409))
    name = fleet.node_name(index)
    patch = fleet.pool_taints(index)
    api.call("PATCH", f"/api/v1/nodes/{name}", patch, content_type=MERGE_PATCH)
    api.call("POST", SLICES, fleet.resource_slice(index), ok=(201, 409))


def create_namespace(api: Api, index: int) -> None:
    api.create_namespace(fleet.namespace_name(index), dict(fleet.OPT_IN))


def create_pod(api: Api, index: int) -> None:
    namespace = fleet.namespace_name(index // PODS_PER_NAMESPACE)
    path = f"/api/v1/namespaces/{namespace}/pods"
    api.call("POST", path, fleet.audited_pod(index), ok=(201, 409))


def grow(writers: Writers, have: SizeFigures | None, want: SizeFigures) -> float:
    """The cluster grown from ``have`` to ``want``; the seconds it took."""
    started = time.monotonic()
    nodes = 0 if have is None else have.nodes
    namespaces = 0 if have is None else have.namespaces
    pods = 0 if have is None else have.pods
    writers.run(create_node, range(nodes, want.nodes))
    print(f"  {want.nodes:,} nodes and ResourceSlices ({_since(started)})", flush=True)
    writers.run(create_namespace, range(namespaces, want.namespaces))
    step = 10_000
    for first in range(pods, want.pods, step):
        writers.run(create_pod, range(first, min(first + step, want.pods)))
        print(f"  {min(first + step, want.pods):,} pods ({_since(started)})", flush=True)
    return time.monotonic() - started


def _since(started: float) -> str:
    return f"{time.monotonic() - started:.0f} s"


def prepare(api: Api, work: Path) -> Path:
    """The PriorityClasses and DeviceClasses a cluster of the policy has; the policy file."""
    for obj in fleet.priority_classes():
        api.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", obj, ok=(201, 409))
    for obj in fleet.device_classes():
        api.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", obj, ok=(201, 409))
    policy = work / "policy.yaml"
    policy.write_text(fleet.policy_text())
    return policy


# -- the replica -------------------------------------------------------------------------


class Replica:
    """One ``serve`` replica of the live inventory, started at construction."""

    def __init__(self, kubeconfig: Path, policy: Path, work: Path) -> None:
        work.mkdir(parents=True, exist_ok=True)
        self.pki = make_pki(work)
        self.port = free_port()
        self.metrics_port = free_port()
        self.log = work / "serve.log"
        extra = ("--kubeconfig", str(kubeconfig), "--policy", str(policy), "--audit-interval", "0")
        self.started = time.monotonic()
        self.server = start_server(
            REPOSITORY, self.pki, self.port, self.log, self.metrics_port, extra
        )
        self.context = ssl.create_default_context(cafile=str(self.pki.ca))

    @property
    def pid(self) -> int:
        return self.server.pid

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=30)

    def inventory_detail(self, connection: http.client.HTTPSConnection) -> str:
        connection.request("GET", "/readyz")
        body = connection.getresponse().read()
        checks = orjson.loads(body).get("checks", {})
        return str(checks.get("inventory", {}).get("detail", ""))

    def wait_synced(self, timeout: float = SYNC_TIMEOUT) -> tuple[float, str]:
        """Seconds from start until ``/readyz`` says every kind synced, and what it said."""
        asyncio.run(wait_until_healthy(self.port, self.pki.ca, self.server))
        connection = self.connection()
        try:
            while time.monotonic() - self.started < timeout:
                if self.server.poll() is not None:
                    raise SystemExit(f"the replica exited with {self.server.returncode}")
                try:
                    detail = self.inventory_detail(connection)
                except (OSError, http.client.HTTPException):
                    connection.close()
                    detail = ""
                if detail and "not synced yet" not in detail:
                    return time.monotonic() - self.started, detail
                time.sleep(0.1)
        finally:
            connection.close()
        raise SystemExit(f"the inventory did not sync within {timeout:.0f} s; see {self.log}")

    def metrics(self) -> str:
        """The replica's /metrics text."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            return str(reply.read().decode())

    def node_events(self) -> tuple[int, int]:
        """The node watch events the replica applied so far, and how many changed its
        inventory (``gpu_admission_inventory_*_total``); (0, 0) if it does not say."""
        return node_event_counts(self.metrics())

    def full_collections(self) -> int | None:
        """The replica's full garbage collections so far; None if it does not say."""
        return full_collections(self.metrics())

    def stop(self) -> None:
        stop_server(self.server)


class Reviewer:
    """A class pod's CREATE reviewed as kube-apiserver sends it: ``/mutate``, then
    ``/validate`` with the pod the mutation's patch made, over one kept-alive connection."""

    def __init__(self, replica: Replica) -> None:
        self.replica = replica
        self.connection = replica.connection()
        self.mutate = mutate_body()
        status, reply = self.post("/mutate", self.mutate)
        if status != 200:
            raise SystemExit(f"/mutate answered {status}: {reply[:500]!r}")
        self.validate = validate_body(patch_of(reply))
        status, reply = self.post("/validate", self.validate)
        if status != 200 or not orjson.loads(reply)["response"]["allowed"]:
            raise SystemExit(f"/validate did not allow the class pod: {status} {reply[:800]!r}")

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        for attempt in (1, 2):
            try:
                self.connection.request("POST", path, body=body, headers=headers)
                response = self.connection.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                self.connection.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def review(self) -> bool:
        """One review; whether both answers were 200 and allowed it."""
        for path, body in (("/mutate", self.mutate), ("/validate", self.validate)):
            status, reply = self.post(path, body)
            if status != 200 or b'"allowed":true' not in reply:
                return False
        return True

    def window(self, rate: float, seconds: float) -> Latency:
        """Reviews due at ``rate`` a second for ``seconds``, each timed from when it was
        due (so a stall delays the reviews behind it as it would delay kube-apiserver's,
        rather than hiding them); none is sent past the window, however late."""
        samples: list[float] = []
        failed = 0
        due = int(rate * seconds)
        started = time.monotonic()
        deadline = started + seconds
        sent = 0
        while sent < due and time.monotonic() < deadline:
            scheduled = started + sent / rate
            delay = scheduled - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent += 1
            try:
                ok = self.review()
            except (OSError, http.client.HTTPException):
                ok = False
            if ok:
                samples.append(time.monotonic() - scheduled)
            else:
                failed += 1
        return Latency(tuple(samples), failed, due)

    def close(self) -> None:
        self.connection.close()


@dataclass(frozen=True)
class Admin:
    """How a process of its own reaches kube-apiserver as admin (an SSL context does not
    cross processes)."""

    url: str
    ca: Path
    cert: Path
    key: Path

    @classmethod
    def of(cls, cluster: ControlPlane) -> Admin:
        return cls(
            cluster.api_url, cluster.ca_path, cluster.admin_cert_path, cluster.admin_key_path
        )

    def api(self) -> Api:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(self.cert, self.key)
        return Api(self.url, context)


def churn(admin: Admin, nodes: int, rate: float, first: int, stop: Any, results: Any) -> None:
    """``rate`` node changes a second, node after node from step ``first``, over four
    connections, until ``stop`` is set; (changes made, failed, seconds) put on
    ``results``. Run in a process of its own, so that its threads take nothing from the
    reviewing client's. The steps of each size go on from those of the sizes before: the
    same step again writes what is there already, which kube-apiserver does not send
    to any watch."""
    local = threading.local()
    counts = {"made": 0, "failed": 0}
    lock = threading.Lock()

    def change(step: int) -> None:
        api: Api | None = getattr(local, "api", None)
        if api is None:
            api = local.api = admin.api()
        name, subresource, patch = fleet.churn_patch(step, nodes)
        path = f"/api/v1/nodes/{name}" + (f"/{subresource}" if subresource else "")
        try:
            api.call("PATCH", path, patch, content_type=MERGE_PATCH)
            outcome = "made"
        except (ApiError, OSError, http.client.HTTPException):
            outcome = "failed"
        with lock:
            counts[outcome] += 1

    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="churn") as pool:
        results.put("ready")
        started = time.monotonic()
        step = first
        while not stop.is_set():
            delay = started + (step - first) / rate - time.monotonic()
            if delay > 0 and stop.wait(delay):
                break
            pool.submit(change, step)
            step += 1
    results.put((counts["made"], counts["failed"], time.monotonic() - started))


class Churn:
    """The churn in a process of its own, started and finished."""

    def __init__(self, cluster: ControlPlane, nodes: int, rate: float, first: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop, self.results = context.Event(), context.Queue()
        self.process = context.Process(
            target=churn,
            args=(Admin.of(cluster), nodes, rate, first, self.stop, self.results),
            daemon=True,
        )
        self.made = self.failed = 0
        self.seconds = math.nan

    def start(self) -> None:
        self.process.start()
        if self.results.get(timeout=120) != "ready":
            raise RuntimeError("the churn process did not start")

    def finish(self) -> None:
        self.stop.set()
        try:
            self.made, self.failed, self.seconds = self.results.get(timeout=120)
        finally:
            self.process.join(timeout=30)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()


@contextlib.contextmanager
def sampling(pid: int) -> Iterator[MemorySampler]:
    sampler = MemorySampler(pid)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stopped.set()
        sampler.join()


def measure_replica(
    figures: SizeFigures,
    cluster: ControlPlane,
    policy: Path,
    work: Path,
    args: argparse.Namespace,
    first_step: int = 0,
) -> None:
    """The replica's sync, its reviews idle and under churn; the churn's steps start at
    ``first_step`` (the steps the sizes before made)."""
    replica = Replica(cluster.kubeconfig, policy, work)
    try:
        with sampling(replica.pid) as sampler:
            figures.sync_seconds, detail = replica.wait_synced()
            figures.load["sync"] = os.getloadavg()
            print(f"  synced in {figures.sync_seconds:.1f} s: {detail}", flush=True)
            time.sleep(3.0)
        figures.sync_peak_pss = sampler.peak[1]
        figures.synced_pss = memory_mib(replica.pid)[1]
        reviewer = Reviewer(replica)
        try:
            reviewer.window(args.review_rate, min(2.0, args.seconds))  # warm-up
            collected = replica.full_collections()
            figures.idle = reviewer.window(args.review_rate, args.seconds)
            figures.load["idle"] = os.getloadavg()
            figures.idle_full_collections = _delta(collected, replica.full_collections())
            changes = Churn(cluster, figures.nodes, args.churn_rate, first_step)
            events_before = replica.node_events()
            collected = replica.full_collections()
            with sampling(replica.pid) as sampler:
                changes.start()
                try:
                    time.sleep(min(2.0, args.seconds / 4))  # the churn under way
                    figures.churn = reviewer.window(args.review_rate, args.seconds)
                    figures.load["churn"] = os.getloadavg()
                    figures.churn_full_collections = _delta(collected, replica.full_collections())
                finally:
                    changes.finish()
            time.sleep(1.0)  # the last changes on their way to the replica
            events_after = replica.node_events()
            figures.churn_events = events_after[0] - events_before[0]
            figures.churn_snapshots = events_after[1] - events_before[1]
            figures.churn_peak_pss = sampler.peak[1]
            figures.churn_changes, figures.churn_failed = changes.made, changes.failed
            figures.churn_seconds = changes.seconds
        finally:
            reviewer.close()
    finally:
        replica.stop()
        for line in inventory_complaints(replica.log):
            print(f"  replica: {line}", flush=True)


def _delta(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else after - before


def inventory_complaints(log: Path) -> list[str]:
    """What the replica's inventory logged above info (a watch cut short, a relist): while
    its watches are down the churn does not reach it, and its reviews look unhurt."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [
        line[:300]
        for line in lines
        if '"gpu_admission.inventory"' in line and '"level":"info"' not in line
    ]


@dataclass(frozen=True)
class AuditRun:
    seconds: float
    peak_pss: float
    exit: int
    requests: dict[str, int]
    load: tuple[float, float, float]


def run_audit(
    cluster: ControlPlane, api: Api, policy: Path, out: Path, namespaces: int | None = None
) -> AuditRun:
    """The audit command once, of every opted-in namespace or (``namespaces``) of the
    first so many."""
    command = [sys.executable, "-m", "webhook.cli", "audit"]
    command += ["--kubeconfig", str(cluster.kubeconfig), "--policy", str(policy), "--quiet"]
    for index in range(namespaces or 0):
        command += ["-n", fleet.namespace_name(index)]
    env = {**os.environ, "XDG_CACHE_HOME": str(out.parent / "cache")}
    before = request_counts(api.text("/metrics"))
    started = time.monotonic()
    with out.open("wb") as written:
        audit = subprocess.Popen(command, cwd=REPOSITORY, env=env, stdout=written, stderr=written)
        try:
            with sampling(audit.pid) as sampler:
                code = audit.wait(timeout=AUDIT_TIMEOUT)
        finally:
            if audit.poll() is None:
                audit.kill()
                audit.wait()
    seconds = time.monotonic() - started
    load = os.getloadavg()
    requests = request_delta(before, request_counts(api.text("/metrics")))
    if code not in (0, 1):
        raise SystemExit(f"the audit command exited with {code}; see {out}")
    return AuditRun(seconds, sampler.peak[1], code, requests, load)


def measure_audit(
    figures: SizeFigures,
    cluster: ControlPlane,
    api: Api,
    policy: Path,
    work: Path,
    smallest: SizeFigures | None,
) -> None:
    """The audit of every pod; with ``smallest``, also of as many namespaces (and pods)
    as it had, on this size's nodes: what the pod count alone costs."""
    whole = run_audit(cluster, api, policy, work / "audit.out")
    figures.audit_seconds, figures.audit_peak_pss = whole.seconds, whole.peak_pss
    figures.audit_exit, figures.audit_requests = whole.exit, whole.requests
    figures.load["audit"] = whole.load
    if smallest is None:
        return
    part = run_audit(cluster, api, policy, work / "audit-part.out", smallest.namespaces)
    figures.part_audit_pods = smallest.pods
    figures.part_audit_seconds, figures.part_audit_peak_pss = part.seconds, part.peak_pss


# -- the run ------------------------------------------------------------------------------


def sizes_of(nodes: list[int], pods_per_node: int) -> list[SizeFigures]:
    """The sizes to measure, smallest first: nodes, their slices, pods and namespaces."""
    sizes = []
    for count in sorted(nodes):
        pods = count * pods_per_node
        namespaces = max(1, math.ceil(pods / PODS_PER_NAMESPACE))
        sizes.append(SizeFigures(count, count, namespaces, pods))
    return sizes


def binaries() -> Path:
    """etcd and kube-apiserver, built as the e2e harness builds them if missing."""
    directory = bin_dir()
    if all((directory / name).is_file() for name in ("etcd", "kube-apiserver")):
        return directory
    return ensure_binaries()


def commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "webhook"],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (webhook/ modified)" if dirty else "")


def machine() -> str:
    cores = len(os.sched_getaffinity(0))
    return f"{this_cpu_model()}, {cores} cores, Python {platform.python_version()}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", default="1000,2500,5000", help="sizes, comma-separated")
    parser.add_argument("--pods-per-node", type=int, default=20)
    parser.add_argument("--churn-rate", type=float, default=50.0, help="node changes/s")
    parser.add_argument("--review-rate", type=float, default=50.0, help="reviews/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="of each review window")
    parser.add_argument("--connections", type=int, default=8, help="to kube-apiserver")
    parser.add_argument("--tiny", action="store_true", help="20 nodes, 200 pods, 3 s windows")
    args = parser.parse_args(argv)
    if args.tiny:
        args.nodes, args.pods_per_node, args.seconds = "20", 10, 3.0
    args.sizes = [int(count) for count in args.nodes.split(",")]
    return args


def main(argv: list[str] | None = None) -> list[SizeFigures]:
    args = parse_args(argv)
    sizes = sizes_of(args.sizes, args.pods_per_node)
    print(f"# gpu-admission at scale, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"commit {commit()}; {machine()}")
    print(
        f"reviews at {args.review_rate:g}/s for {args.seconds:g} s per window; churn "
        f"{args.churn_rate:g} node changes/s; {args.pods_per_node} pods per node, "
        f"{PODS_PER_NAMESPACE} per namespace; chart limit 384 MiB",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as scratch:
        work = Path(scratch)
        cluster = apiserver_only(binaries(), work / "cluster")
        cluster.start()
        writers: Writers | None = None
        api = Api(cluster.api_url, cluster.admin_ssl_context())
        try:
            writers = Writers(cluster, args.connections)
            policy = prepare(api, work)
            previous: SizeFigures | None = None
            for figures in sizes:
                largest = figures is sizes[-1] and len(sizes) > 1
                print(f"\n## {figures.nodes:,} nodes", flush=True)
                figures.setup_seconds = grow(writers, previous, figures)
                run = work / f"nodes-{figures.nodes}"
                churned = sum(s.churn_changes + s.churn_failed for s in sizes if s is not figures)
                measure_replica(figures, cluster, policy, run / "replica", args, churned)
                measure_audit(figures, cluster, api, policy, run, sizes[0] if largest else None)
                print(table([figures]), flush=True)
                previous = figures
        finally:
            api.close()
            if writers is not None:
                writers.close()
            cluster.stop()
    print("\n## Figures\n")
    print(table(sizes))
    print("\nThe audit's requests to kube-apiserver, by verb and resource, at each size:")
    print("\n".join(request_lines(sizes)))
    print("\n## Targets\n")
    print("\n".join(verdicts(sizes)))
    values = chart_values(sizes)
    if values:
        print("\n" + "\n".join(values))
    return sizes
