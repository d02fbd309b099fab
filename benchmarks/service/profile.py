"""Where one replica's CPU goes per review under saturation, by family of code.

`python -m benchmarks.service.profile` starts `serve` on the default policy, and the
constant-allow app on the same stack, each under cProfile and pinned to one core as
`benchmarks.service` does, drives /mutate and then /validate of one server at a time
with the compiled load generator in a closed loop, then stops them so that cProfile
writes its statistics. Each function's own time (tottime, C functions such as orjson's
and the ssl module's included) goes to the family of its file (``FAMILIES``), and the
families' shares become µs per review with the CPU per review that the profiled
process used. cProfile slows Python calls more than C calls, so read the shares, not
the totals; the difference between the two servers is where ours spends more than its
floor.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import pstats
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.replica import Pki, free_port, make_pki, wait_until_healthy
from benchmarks.service.bodies import expected_markers
from benchmarks.service.load_generator import build_loadgen, loadgen_command, measure
from benchmarks.service.report import FLOOR, OURS
from benchmarks.service.run import (
    TIMEOUT_QUERY,
    UIDS,
    bodies,
    choose_cores,
    server_commands,
    start_pinned,
    stop,
)

# (family, substrings of a function's "file:name"); the first family with a match takes
# the function's own time.
FAMILIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("engine", ("webhook/engine/",)),
    ("policy", ("webhook/policy/",)),
    ("JSON", ("orjson", "/json/")),
    ("TLS", ("_ssl.", "ssl.py", "SSLObject", "SSLSocket", "MemoryBIO")),
    ("HTTP edge (webhook/http)", ("webhook/http/",)),
    ("ASGI server, HTTP parsing", ("uvicorn/", "h11/", "httptools")),
    ("FastAPI, Starlette", ("fastapi/", "starlette/")),
    ("event loop, sockets", ("asyncio/", "selectors.py", "select.epoll", "socket", "uvloop")),
)
OTHER = "other"


@dataclass(frozen=True)
class Profile:
    server: str
    route: str
    reviews_per_second: float
    cpu_us_per_review: float
    shares: dict[str, float]


def family_of(function: str) -> str:
    for family, needles in FAMILIES:
        if any(needle in function for needle in needles):
            return family
    return OTHER


def shares_of(stats_file: Path) -> dict[str, float]:
    """Each family's share of the own time cProfile recorded."""
    stats = pstats.Stats(str(stats_file))
    own: collections.Counter[str] = collections.Counter()
    for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        own[family_of(f"{filename}:{name}")] += row[2]
    total = sum(own.values()) or 1.0
    return {family: own[family] / total for family in [*dict(FAMILIES), OTHER]}


def profiled(command: list[str], stats_file: Path) -> list[str]:
    """`command` (python -m MODULE ...) run under cProfile, writing `stats_file` when it
    stops (``benchmarks.service.cprofile_run``)."""
    return [command[0], "-m", "benchmarks.service.cprofile_run", str(stats_file), *command[2:]]


def profile_one(
    binary: Path, server: str, route: str, pki: Pki, core: int, client_cores: set[int],
    seconds: float, work: Path,
) -> Profile:  # fmt: skip
    port = free_port()
    stats_file = work / f"{server}{route.replace('/', '-')}.prof"
    command = profiled(server_commands(pki, {OURS: port, FLOOR: port})[server], stats_file)
    process = start_pinned(command, core, work / f"{server}.log")
    try:
        asyncio.run(wait_until_healthy(port, pki.ca, process))
        body = work / f"body{route.replace('/', '-')}.json"
        load = loadgen_command(
            binary,
            f"https://127.0.0.1:{port}{route}{TIMEOUT_QUERY}",
            body,
            pki.ca,
            connections=16,
            seconds=seconds,
            warmup=1.0,
            expect=expected_markers(UIDS[route], patched=(server, route) == (OURS, "/mutate")),
        )
        result, cpu = measure(load, process.pid, client_cores)
    finally:
        stop(process)
    return Profile(
        server,
        route,
        result.throughput,
        cpu / max(result.count, 1) * 1e6,
        shares_of(stats_file),
    )


def table(profiles: list[Profile]) -> str:
    families = [*dict(FAMILIES), OTHER]
    head = ["route", "server", "reviews/s", "CPU µs/review", *families]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in profiles:
        cells = [p.route, p.server, f"{p.reviews_per_second:,.0f}", f"{p.cpu_us_per_review:.0f}"]
        cells += [f"{p.shares[f] * p.cpu_us_per_review:.0f}" for f in families]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.service.profile", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument(
        "--stats-dir", type=Path, help="keep the cProfile statistics of each row here"
    )
    args = parser.parse_args(argv)
    binary = build_loadgen()
    server_core, client_cores = choose_cores(os.sched_getaffinity(0), None)
    with tempfile.TemporaryDirectory(prefix="gpu-admission-service-profile-") as tmp:
        work = Path(tmp)
        pki = make_pki(work)
        port = free_port()
        process = start_pinned(server_commands(pki, {OURS: port, FLOOR: port})[OURS],
                               server_core, work / "bodies.log")  # fmt: skip
        try:
            asyncio.run(wait_until_healthy(port, pki.ca, process))
            for route, body in bodies(port, pki.ca).items():
                (work / f"body{route.replace('/', '-')}.json").write_bytes(body)
        finally:
            stop(process)
        profiles = [
            profile_one(binary, name, route, pki, server_core, client_cores, args.seconds, work)
            for route in ("/mutate", "/validate")
            for name in (OURS, FLOOR)
        ]
        if args.stats_dir is not None:
            args.stats_dir.mkdir(parents=True, exist_ok=True)
            for stats in work.glob("*.prof"):
                shutil.copy(stats, args.stats_dir / stats.name)
    print(
        f"µs of the server's CPU per review by family of the function's own time (cProfile; "
        f"{args.seconds:.0f} s closed loop over 16 connections per row; server on CPU "
        f"{server_core})\n"
    )
    print(table(profiles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
