"""A memory soak of one real `serve` replica: `python -m benchmarks.soak`.

    python -m benchmarks.soak [--reviews 1000000] [--warmup 10000] [--warmup-seconds 15]
                              [--clients 4] [--samples 10] [--quick] [--repository DIR]

One replica is started as `benchmarks.attack` starts it (`python -m webhook.cli serve`,
a test CA, the embedded policy, `--metrics-port 0`). `--clients` processes each keep one
HTTPS connection alive (http.client) and post reviews one after another, in a fixed mix
(`benchmarks.soak.payloads`): /mutate of class pods and /validate of the mutated pods,
pods without a class, denials, reinvocations, malformed pods, bodies that are not JSON
or not AdmissionReviews, and one large pod in a hundred (46 to 52 KiB, over the 32 KiB
judged on the event loop, so the review worker process judges it). Every request has a
uid of its own; every reply is checked (status, uid echoed, `allowed`).

The server and its children (/proc/PID/smaps_rollup: RSS and PSS; /proc/PID/fd;
/proc/PID/status Threads) are sampled once healthy, after the warm-up (`--warmup`
reviews, and at least `--warmup-seconds` so that the server's periodic tasks have run
and started their threads), every `--reviews / --samples` reviews under load, at the
end, and after the clients closed their connections. The samples after the warm-up
and at the end are both taken with the clients' connections open and idle, one second
after the last reply: the growth between them, in %, must stay under 10% for RSS and
PSS, with no more descriptors, threads or processes. The peak is read every second.

`--quick` is 20,000 reviews after a warm-up of 2,000 (and 15 s), for development.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import platform
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common.replica import (
    REPOSITORY,
    free_port,
    make_pki,
    stop_server,
    wait_until_healthy,
)
from benchmarks.common.report import this_cpu_model
from benchmarks.soak.client import ClientArgs, ClientReport, phase_seconds, run_client, split
from benchmarks.soak.payloads import Payload, payloads
from benchmarks.soak.proc import (
    GROWTH_LIMIT_PERCENT,
    Sample,
    changes,
    cpu_share,
    judge,
    memory_mib,
    sample,
    sample_table,
)

QUICK_REVIEWS = 20_000
QUICK_WARMUP = 2_000
WARMUP_SECONDS = 15.0
"""The server polls its certificate files every 5 s and trims its heap every 10 s, each in
a thread of asyncio's default executor, which starts its threads when first needed: the
warm-up lets both run at least once."""
SETTLE_SECONDS = 1.0
"""Between the last reply of a phase and its sample: less than the server's 5-s idle
timeout, so the clients' connections are still open."""
POLL_SECONDS = 1.0


def start_server(repository: Path, pki: Any, port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "webhook.cli", "serve", "--port", str(port)]
    command += ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--metrics-port", "0"]
    env = {**os.environ, "XDG_CACHE_HOME": str(log.parent / "cache")}
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=repository, env=env, stdout=out, stderr=out)


def milestones(warmup: int, reviews: int, samples: int) -> list[int]:
    """Total reviews sent at which to sample under load: `samples` evenly spaced points
    after the warm-up, the last one (the end) left to the end sample."""
    if samples < 1:
        return []
    step = reviews / samples
    return [warmup + round(step * index) for index in range(1, samples)]


@dataclass
class Run:
    samples: list[Sample]
    baseline: Sample
    end: Sample
    peak_rss: float
    peak_pss: float
    reports: list[ClientReport]
    measured_seconds: float
    warmup_seconds: float


class Aborted(Exception):
    pass


def progress_of(progress: Any) -> int:
    return int(sum(progress))


def drive(
    args: argparse.Namespace,
    port: int,
    ca: Path,
    server: subprocess.Popen[bytes],
    mix: Sequence[Payload],
) -> Run:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(args.clients + 1)
    results = context.Queue()
    progress = context.Array("q", args.clients, lock=False)
    phases_done = context.Array("i", args.clients, lock=False)
    warmups, reviews = split(args.warmup, args.clients), split(args.reviews, args.clients)
    clients = [
        context.Process(
            target=run_client,
            args=(
                ClientArgs(
                    index,
                    "127.0.0.1",
                    port,
                    str(ca),
                    list(mix),
                    warmups[index],
                    args.warmup_seconds,
                    reviews[index],
                ),
                progress,
                phases_done,
                barrier,
                results,
            ),
            daemon=True,
        )
        for index in range(args.clients)
    ]
    began = time.monotonic()
    samples = [sample("healthy, no client yet", server.pid, 0, 0.0)]
    peak = [samples[0].rss_mib, samples[0].pss_mib]

    def elapsed() -> float:
        return time.monotonic() - began

    def watch(phase: int, points: list[int], label: str) -> None:
        """Poll until every client is done with `phase` (1: the warm-up, 2: the measured
        reviews): the peak every second, a sample at each of `points` (reviews sent);
        give up when the server or a client has gone."""
        pending = list(points)
        last_report = time.monotonic()
        while min(phases_done) < phase:
            done = progress_of(progress)
            if server.poll() is not None:
                raise Aborted(f"the server exited with {server.returncode}")
            if any(c.exitcode not in (None, 0) for c in clients):
                raise Aborted("a client process failed")
            if all(c.exitcode is not None for c in clients):
                raise Aborted("the clients stopped short")
            rss, pss = memory_mib(server.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            while pending and done >= pending[0]:
                samples.append(sample(label, server.pid, done, elapsed()))
                pending.pop(0)
            if time.monotonic() - last_report >= 60:
                print(f"  {done:,} reviews after {elapsed():,.0f} s", flush=True)
                last_report = time.monotonic()
            time.sleep(POLL_SECONDS)

    def quiet_sample(label: str) -> Sample:
        barrier.wait(600)  # every client done with the phase
        time.sleep(SETTLE_SECONDS)
        taken = sample(label, server.pid, progress_of(progress), elapsed())
        samples.append(taken)
        barrier.wait(600)  # let them go on
        return taken

    for client in clients:
        client.start()
    try:
        barrier.wait(120)  # every client connected
        began = time.monotonic()
        watch(1, [], "warm-up")
        baseline = quiet_sample("after warm-up")
        points = milestones(baseline.reviews, args.reviews, args.samples)
        watch(2, points, "under load")
        end = quiet_sample("end")
        reports = [results.get(timeout=120) for _ in clients]
        for client in clients:
            client.join(30)
        time.sleep(SETTLE_SECONDS)
        samples.append(sample("clients gone", server.pid, progress_of(progress), elapsed()))
    except BaseException:
        barrier.abort()
        for client in clients:
            if client.is_alive():
                client.terminate()
        raise
    return Run(
        samples,
        baseline,
        end,
        max([peak[0], *(s.rss_mib for s in samples)]),
        max([peak[1], *(s.pss_mib for s in samples)]),
        reports,
        measured_seconds=phase_seconds(reports, "measured"),
        warmup_seconds=phase_seconds(reports, "warm-up"),
    )


def percentile(values: Sequence[int], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000


def kinds_table(mix: Sequence[Payload], reports: Sequence[ClientReport]) -> str:
    """Per kind of request: how many, the expected reply, wrong replies, latency (ms)."""
    header = ["request", "status", "allowed", "sent", "wrong", "p50 ms", "p99 ms", "max ms"]
    lines = []
    for index, payload in enumerate(mix):
        micros: array[int] = array("I")
        for report in reports:
            micros.extend(report.micros[index])
        lines.append(
            [
                payload.name,
                str(payload.status),
                "" if payload.allowed is None else str(payload.allowed).lower(),
                f"{sum(r.sent[index] for r in reports):,}",
                f"{sum(r.wrong[index] for r in reports):,}",
                f"{percentile(micros, 0.5):.2f}",
                f"{percentile(micros, 0.99):.2f}",
                f"{max(micros, default=0) / 1000:.2f}",
            ]
        )
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    out = []
    for number, row in enumerate([header, *lines]):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        out.append("| " + " | ".join(cells) + " |")
        if number == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def machine() -> str:
    load = ", ".join(f"{n:.2f}" for n in os.getloadavg())
    return (
        f"{this_cpu_model()}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python "
        f"{platform.python_version()}; load average {load}"
    )


def report(
    args: argparse.Namespace,
    argv: Sequence[str],
    mix: Sequence[Payload],
    run: Run,
    log_text: str,
    shutdown: float,
    started: datetime,
    machine_before: str,
) -> bool:
    total_sent = sum(sum(r.sent) for r in run.reports)
    wrong = sum(sum(r.wrong) for r in run.reports)
    connections = sum(r.connections for r in run.reports)
    failures = sum(r.failures for r in run.reports)
    print(f"command: python -m benchmarks.soak {' '.join(argv)}".rstrip())
    print(f"server: {args.repository.resolve()} (python -m webhook.cli serve, embedded policy)")
    print(f"date: {started.isoformat(timespec='seconds')}")
    print(f"machine at start: {machine_before}")
    print(f"machine at end:   {machine()}")
    print(
        f"reviews: {run.baseline.reviews:,} warm-up (at least {args.warmup:,} and "
        f"{args.warmup_seconds:g} s) + {args.reviews:,} measured over {args.clients} "
        f"kept-alive HTTPS connections (one client process each); {total_sent:,} sent, "
        f"{wrong:,} wrong replies, {failures:,} without reply, {connections} connections "
        f"opened"
    )
    rate = args.reviews / run.measured_seconds if run.measured_seconds > 0 else 0.0
    print(
        f"duration: warm-up {run.warmup_seconds:,.0f} s, measured {run.measured_seconds:,.0f} s"
        f" ({rate:,.0f} reviews/s)\n"
    )
    print(sample_table(run.samples, run.baseline))
    print(
        f"\nCPU of the server and its children from after warm-up to the end: "
        f"{cpu_share(run.baseline, run.end):.0%} of one core"
    )
    print(
        f"peak (read every {POLL_SECONDS:g} s and at each sample): RSS {run.peak_rss:.1f} MiB, PSS "
        f"{run.peak_pss:.1f} MiB"
    )
    verdict = judge(run.baseline, run.end, GROWTH_LIMIT_PERCENT)
    for sentence in verdict.sentences():
        print(sentence)
    for line in changes(run.baseline, run.end):
        print(f"  {line}")
    print()
    print(kinds_table(mix, run.reports))
    examples = [e for r in run.reports for e in r.examples]
    for example in examples[:5]:
        print(f"  wrong: {example}")
    errors = [line for line in log_text.splitlines() if '"level":"error"' in line]
    print(
        f"\nshutdown on SIGTERM: {shutdown:.1f} s; server log: {len(errors)} error lines, "
        f"{log_text.count('Traceback')} tracebacks, {len(log_text.splitlines()):,} lines"
    )
    for line in errors[:3]:
        print(f"  {line[:200]}")
    return verdict.ok and wrong == 0 and not errors


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--reviews", type=int, default=1_000_000, help="after the warm-up")
    parser.add_argument("--warmup", type=int, default=10_000, help="reviews, at least")
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=WARMUP_SECONDS,
        help="the warm-up's shortest duration (the server's periodic tasks run in it)",
    )
    parser.add_argument("--clients", type=int, default=4, help="processes, a connection each")
    parser.add_argument("--samples", type=int, default=10, help="samples under load")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_REVIEWS:,} reviews after {QUICK_WARMUP:,} of warm-up",
    )
    parser.add_argument("--repository", type=Path, default=REPOSITORY)
    args = parser.parse_args(argv)
    if args.quick:
        args.reviews, args.warmup = QUICK_REVIEWS, QUICK_WARMUP
    if args.clients < 1 or args.reviews < args.clients or args.warmup < args.clients:
        parser.error("each client needs at least one review in each phase")

    started = datetime.now(UTC)
    before = machine()
    mix = payloads()
    with tempfile.TemporaryDirectory(prefix="gpu-admission-soak-") as directory:
        pki = make_pki(Path(directory))
        port = free_port()
        log = Path(directory) / "server.log"
        server = start_server(args.repository.resolve(), pki, port, log)
        try:
            asyncio.run(wait_until_healthy(port, pki.ca, server))
            run = drive(args, port, pki.ca, server, mix)
        finally:
            shutdown = stop_server(server)
        log_text = log.read_text("utf-8", errors="replace")
    passed = report(args, argv, mix, run, log_text, shutdown, started, before)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
