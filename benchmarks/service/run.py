"""The service over real HTTPS, driven by a compiled load generator: `make bench-service`.

    python -m benchmarks.service [--seconds 10] [--rounds 3] [--connections 16]
                                 [--warmup 1] [--server-core N] [--json FILE]

Two servers are started, each a subprocess pinned to the same one core (and its
children with it; `--server-core`, default the last core this process may use):

- `ours`: a real replica, `python -m webhook.cli serve` on the embedded default policy,
  with a test CA's serving certificate and `--metrics-port 0`, as `benchmarks.attack`
  starts it;
- `constant-allow`: `benchmarks.common.stub_webhook`, FastAPI under uvicorn with the settings
  `serve` gives it, which decodes each review for its uid and allows it: the floor of
  this stack, measured in the same run.

The load generator (`benchmarks/service/loadgen`, Go, built once into the cache) runs on the
other cores. It posts one AdmissionReview again and again over kept-alive HTTP/1.1
connections, as kube-apiserver does, and checks that every reply is a 200 holding the
review's uid and `"allowed":true` (and, from ours on /mutate, a JSONPatch). The bodies
are those kube-apiserver sends for a pod of a Deployment (`benchmarks.service.bodies`):
to `/mutate` the pod as created, to `/validate` the pod with the patch of our own
`/mutate` reply applied.

For each round, each route and each server (their order rotated each round, so that
the two servers' runs of a route are next to each other in time):

1. saturation: closed loop over `--connections` connections for `--seconds`;
2. open loop at 50% and then 90% of the saturation that server just reached on that
   route: requests are sent on a timer whatever the replies, and each latency counts
   from the request's scheduled time (no coordinated omission).

Each run is preceded by `--warmup` seconds of the same load, not recorded. The
server's CPU time (utime + stime of it and its children, from /proc) is read right
before and after each measured window, through a handshake with the load generator,
and divided by the reviews answered in it. The table gives medians over the rounds
and the ratio of ours to the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import http.client
import os
import shlex
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from benchmarks.common.replica import Pki, free_port, make_pki, wait_until_healthy
from benchmarks.common.report import machine, rotated
from benchmarks.service.bodies import (
    MUTATE_UID,
    VALIDATE_UID,
    expected_markers,
    mutate_body,
    patch_of,
    validate_body,
)
from benchmarks.service.load_generator import build_loadgen, loadgen_command, measure
from benchmarks.service.report import (
    FLOOR,
    FRACTIONS,
    OURS,
    ROUTES,
    SATURATION,
    SERVERS,
    Run,
    Summary,
    per_pod_cpu,
    results_table,
    summarize,
)

REPOSITORY = Path(__file__).resolve().parents[2]
TIMEOUT_QUERY = "?timeout=10s"
"""kube-apiserver appends the webhook's timeout to the URL it calls."""
OPEN_LOOP_DRAIN = 5.0


def log(message: str) -> None:
    print(f"[bench-service] {message}", file=sys.stderr, flush=True)


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.service", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds before each run")
    parser.add_argument("--server-core", type=int, help="the core of both servers")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rounds < 1 or args.connections < 1 or args.warmup < 0:
        parser.error(
            "--seconds, --rounds and --connections must be positive, --warmup not negative"
        )
    return args


def planned_seconds(args: argparse.Namespace) -> float:
    """Time of the measured runs and their warm-ups (start-up and drains not counted)."""
    runs = args.rounds * len(SERVERS) * len(ROUTES) * (1 + len(FRACTIONS))
    return float(runs * (args.seconds + args.warmup))


# ------------------------------------------------------------------ cores


def choose_cores(allowed: set[int], server_core: int | None) -> tuple[int, set[int]]:
    """The servers' core and the load generator's: every other core allowed, or the
    same one on a machine of one core."""
    if not allowed:
        raise ValueError("no core allowed")
    core = max(allowed) if server_core is None else server_core
    if core not in allowed:
        raise ValueError(f"core {core} is not among those allowed: {sorted(allowed)}")
    return core, (allowed - {core}) or {core}


# ------------------------------------------------------------------ the servers


def start_pinned(command: list[str], core: int, log_file: Path) -> subprocess.Popen[bytes]:
    def pin() -> None:
        os.sched_setaffinity(0, {core})

    env = {**os.environ, "XDG_CACHE_HOME": str(log_file.parent / "cache")}
    with log_file.open("wb") as out:
        return subprocess.Popen(
            command, cwd=REPOSITORY, env=env, stdout=out, stderr=out, preexec_fn=pin
        )


def server_commands(pki: Pki, ports: dict[str, int]) -> dict[str, list[str]]:
    tls = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    serve = ["webhook.cli", "serve", "--metrics-port", "0"]
    return {
        OURS: [sys.executable, "-m", *serve, "--port", str(ports[OURS]), *tls],
        FLOOR: [
            sys.executable,
            "-m",
            "benchmarks.common.stub_webhook",
            "--port",
            str(ports[FLOOR]),
            *tls,
        ],
    }


def stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def post_once(port: int, ca: Path, path: str, body: bytes) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        reply = response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise RuntimeError(f"POST {path}: {response.status} {reply[:300]!r}")
    return reply


def bodies(port: int, ca: Path) -> dict[str, bytes]:
    """The /mutate body, and the /validate body built from our own /mutate reply; both
    checked to be allowed by ours."""
    created = mutate_body()
    patch = patch_of(post_once(port, ca, "/mutate" + TIMEOUT_QUERY, created))
    if not patch:
        raise RuntimeError("ours did not mutate the benchmark pod")
    mutated = validate_body(patch)
    verdict = orjson.loads(post_once(port, ca, "/validate" + TIMEOUT_QUERY, mutated))
    if not verdict["response"]["allowed"]:
        raise RuntimeError(f"ours denied the mutated pod: {verdict['response']}")
    return {"/mutate": created, "/validate": mutated}


# ------------------------------------------------------------------ one run


def describe(run: Run) -> str:
    result = run.result
    latency = result.latency_ms
    cpu = run.cpu_us_per_review
    text = (
        f"round {run.round + 1} {run.server:>14} {run.route:<9} {run.load:>10}: "
        f"{result.throughput:8,.0f}/s  p50 {latency.get('p50', 0):7.2f}  "
        f"p99 {latency.get('p99', 0):7.2f}  p99.9 {latency.get('p99.9', 0):7.2f} ms  "
        f"CPU {cpu or 0:6,.0f} µs/review  client CPU {result.cpu_seconds / result.duration:.0%}"
    )
    if result.errors or result.dropped:
        text += f"  ERRORS {result.errors} dropped {result.dropped} {result.error_sample[:2]}"
    return text


@dataclasses.dataclass(frozen=True)
class Setup:
    """What every run needs: the load generator, the CA, the servers and the bodies."""

    binary: Path
    ca: Path
    ports: dict[str, int]
    pids: dict[str, int]
    body_files: dict[str, Path]
    client_cores: set[int]
    connections: int
    seconds: float
    warmup: float


UIDS = {"/mutate": MUTATE_UID, "/validate": VALIDATE_UID}


def one_run(setup: Setup, server: str, route: str, load: str, rate: float, round_index: int) -> Run:
    command = loadgen_command(
        setup.binary,
        f"https://127.0.0.1:{setup.ports[server]}{route}{TIMEOUT_QUERY}",
        setup.body_files[route],
        setup.ca,
        connections=setup.connections,
        seconds=setup.seconds,
        warmup=setup.warmup,
        rate=rate,
        expect=expected_markers(UIDS[route], patched=(server, route) == (OURS, "/mutate")),
    )
    result, cpu = measure(command, setup.pids[server], setup.client_cores)
    run = Run(server, route, load, round_index, result, cpu)
    log(describe(run))
    return run


def run_all(setup: Setup, rounds: int) -> list[Run]:
    """Per round and route, each server in turn (their order rotated each round):
    saturation, then the open-loop fractions of it."""
    runs: list[Run] = []
    for round_index in range(rounds):
        for route in ROUTES:
            for server in rotated(SERVERS, round_index):
                saturation = one_run(setup, server, route, SATURATION, 0.0, round_index)
                runs.append(saturation)
                for load, fraction in FRACTIONS.items():
                    if saturation.result.throughput > 0:
                        rate = fraction * saturation.result.throughput
                        runs.append(one_run(setup, server, route, load, rate, round_index))
    return runs


# ------------------------------------------------------------------ the report


def report(
    command: str,
    args: argparse.Namespace,
    at_start: dict[str, Any],
    summaries: list[Summary],
    sizes: dict[str, int],
    cores: tuple[int, set[int]],
    elapsed: float,
    server_errors: dict[str, int],
) -> str:
    load = ", ".join(f"{x:.2f}" for x in at_start["load"])
    end_load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    server_core, client_cores = cores
    client_share = max((s.client_cpu_share for s in summaries), default=0.0)
    lines = [
        f"### {at_start['date'][:10]}, the service over HTTPS: ours and the constant-allow floor",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- {args.rounds} rounds; per round and route, each server (order rotated): "
        f"{args.seconds:g} s closed loop over {args.connections} kept-alive HTTP/1.1 "
        "connections (saturation), then open loop at 50% and 90% of it; each after "
        f"{args.warmup:g} s of warm-up; medians over rounds (reviews/s: and their range)",
        f"- bodies: /mutate {sizes['/mutate']:,} bytes (a Deployment's pod as created), "
        f"/validate {sizes['/validate']:,} bytes (the pod with ours' patch applied)",
        f"- both servers pinned to CPU {server_core} (children included); the load "
        "generator (Go, `benchmarks/service/loadgen`) on CPU "
        f"{','.join(map(str, sorted(client_cores)))},"
        f" at most {client_share:.0%} of a core",
        f"- machine: {at_start['nproc']} CPUs, {at_start['cpu']}, Linux {at_start['kernel']}, "
        f"Python {at_start['python']}; {at_start['date']}",
        f"- 1/5/15-minute load average at start {load}, at end {end_load}; "
        f"run took {elapsed / 60:.1f} min",
        "",
        results_table(summaries, args.connections),
        "",
    ]
    per_pod = per_pod_cpu(summaries)
    if OURS in per_pod and FLOOR in per_pod:
        lines.append(
            f"- CPU per pod CREATE (one /mutate and one /validate, at saturation): ours "
            f"{per_pod[OURS]:,.0f} µs, the floor {per_pod[FLOOR]:,.0f} µs "
            f"({per_pod[OURS] / per_pod[FLOOR]:.2f}x)"
        )
    failed = [s for s in summaries if s.errors or s.dropped]
    for s in failed:
        lines.append(f"- **{s.server} {s.route} {s.load}: {s.errors} errors, {s.dropped} dropped**")
    if any(server_errors.values()):
        lines.append(
            "- error lines in the server logs: "
            + ", ".join(f"{name} {count}" for name, count in server_errors.items())
        )
    return "\n".join(lines)


def error_lines(log_file: Path) -> int:
    text = log_file.read_text("utf-8", errors="replace")
    return sum('"level":"error"' in line for line in text.splitlines()) + text.count("Traceback")


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    command = shlex.join(["python", "-m", "benchmarks.service", *(argv or sys.argv[1:])])
    started = time.monotonic()
    at_start = machine()
    server_core, client_cores = choose_cores(os.sched_getaffinity(0), args.server_core)
    binary = build_loadgen()
    log(
        f"servers on CPU {server_core}, load generator on CPU {sorted(client_cores)}; "
        f"about {planned_seconds(args) / 60:.1f} min of runs"
    )
    with tempfile.TemporaryDirectory(prefix="gpu-admission-bench-service-") as directory:
        work = Path(directory)
        pki = make_pki(work)
        ports = {server: free_port() for server in SERVERS}
        logs = {server: work / f"{server}.log" for server in SERVERS}
        servers: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name, server_command in server_commands(pki, ports).items():
                servers[name] = start_pinned(server_command, server_core, logs[name])
            for name, server in servers.items():
                asyncio.run(wait_until_healthy(ports[name], pki.ca, server))
            review_bodies = bodies(ports[OURS], pki.ca)
            body_files = {}
            for route, body in review_bodies.items():
                body_files[route] = work / f"{route.strip('/')}.json"
                body_files[route].write_bytes(body)
            setup = Setup(
                binary=binary,
                ca=pki.ca,
                ports=ports,
                pids={name: server.pid for name, server in servers.items()},
                body_files=body_files,
                client_cores=client_cores,
                connections=args.connections,
                seconds=args.seconds,
                warmup=args.warmup,
            )
            runs = run_all(setup, args.rounds)
        finally:
            for server in servers.values():
                stop(server)
        server_errors = {name: error_lines(path) for name, path in logs.items()}
    elapsed = time.monotonic() - started
    summaries = summarize(runs)
    sizes = {route: len(body) for route, body in review_bodies.items()}
    cores = (server_core, client_cores)
    print(report(command, args, at_start, summaries, sizes, cores, elapsed, server_errors))
    if args.json:
        args.json.write_bytes(
            orjson.dumps(
                {
                    "command": command,
                    "machine": at_start,
                    "seconds": elapsed,
                    "server_core": server_core,
                    "client_cores": sorted(client_cores),
                    "body_bytes": sizes,
                    "summaries": [dataclasses.asdict(s) for s in summaries],
                    "runs": [dataclasses.asdict(r) for r in runs],
                },
                option=orjson.OPT_INDENT_2,
            )
        )
    return 1 if any(s.errors for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
