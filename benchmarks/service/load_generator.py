"""The load generator of `benchmarks.service`: the Go program in `benchmarks/service/loadgen`,
built once per version of its source into the cache (as `benchmarks/apiserver/allow_go` is),
run pinned to its cores in step with the driver (`measure`: the server's CPU time is
read right before and after the measured window), its JSON report parsed into a
`LoadResult`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from benchmarks.common.go_program import build_go_program
from benchmarks.common.processes import tree_cpu_seconds

SOURCE = Path(__file__).resolve().parent / "loadgen"
PERCENTILES = ("p50", "p90", "p99", "p99.9", "max")


def build_loadgen(source: Path = SOURCE) -> Path:
    """Build the Go program into the cache (once per version of its source)."""
    return build_go_program(source, "loadgen")


@dataclass(frozen=True)
class LoadResult:
    """One run of the load generator (latencies in milliseconds)."""

    mode: str
    rate: float
    connections: int
    body_bytes: int
    scheduled: int
    count: int
    errors: int
    dropped: int
    duration: float
    throughput: float
    latency_ms: dict[str, float]
    protocols: dict[str, int]
    cpu_seconds: float
    error_sample: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.errors == 0 and self.dropped == 0 and self.count > 0


def parse_result(text: str | bytes) -> LoadResult:
    """The last line of the load generator's stdout, its JSON report."""
    lines = [line for line in (text.decode() if isinstance(text, bytes) else text).splitlines()]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise ValueError("the load generator printed nothing")
    data: dict[str, Any] = orjson.loads(lines[-1])
    latency = {str(k): float(v) for k, v in (data.get("latency_ms") or {}).items()}
    missing = [name for name in PERCENTILES if name not in latency and data["count"] > 0]
    if missing:
        raise ValueError(f"the report has no {', '.join(missing)}")
    return LoadResult(
        mode=str(data["mode"]),
        rate=float(data["rate"]),
        connections=int(data["connections"]),
        body_bytes=int(data["body_bytes"]),
        scheduled=int(data["scheduled"]),
        count=int(data["count"]),
        errors=int(data["errors"]),
        dropped=int(data["dropped"]),
        duration=float(data["duration"]),
        throughput=float(data["throughput"]),
        latency_ms=latency,
        protocols={str(k): int(v) for k, v in (data.get("protocols") or {}).items()},
        cpu_seconds=float(data.get("cpu_seconds", 0.0)),
        error_sample=[str(e) for e in data.get("error_sample") or []],
    )


def loadgen_command(
    binary: Path,
    url: str,
    body: Path,
    ca: Path,
    *,
    connections: int,
    seconds: float,
    warmup: float,
    rate: float = 0.0,
    expect: Iterable[str] = (),
    h2: bool = False,
) -> list[str]:
    command = [str(binary), "-url", url, "-body", str(body), "-ca", str(ca)]
    command += ["-c", str(connections), "-duration", f"{seconds}s", "-warmup", f"{warmup}s"]
    if rate > 0:
        command += ["-rate", f"{rate:.3f}"]
    for marker in expect:
        command += ["-expect", marker]
    if h2:
        command.append("-h2")
    return command


def _expect_line(stream: IO[bytes], word: str, loadgen: subprocess.Popen[bytes]) -> None:
    line = stream.readline().strip()
    if line != word.encode():
        loadgen.kill()
        _, stderr = loadgen.communicate()
        raise RuntimeError(
            f"the load generator said {line!r}, not {word!r}: "
            f"{stderr.decode(errors='replace')[-2000:]}"
        )


def measure(
    command: list[str], server_pid: int, client_cores: set[int]
) -> tuple[LoadResult, float]:
    """Run the load generator with -sync; the server's CPU seconds over its measured window."""

    def pin() -> None:
        os.sched_setaffinity(0, client_cores)

    loadgen = subprocess.Popen(
        [*command, "-sync"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=pin,
    )
    assert loadgen.stdin is not None and loadgen.stdout is not None
    _expect_line(loadgen.stdout, "ready", loadgen)
    before = tree_cpu_seconds({"server": server_pid})["server"]
    loadgen.stdin.write(b"\n")
    loadgen.stdin.flush()
    _expect_line(loadgen.stdout, "done", loadgen)
    after = tree_cpu_seconds({"server": server_pid})["server"]
    stdout, stderr = loadgen.communicate(b"\n", timeout=60)
    if loadgen.returncode != 0:
        raise RuntimeError(
            f"the load generator exited with {loadgen.returncode}: "
            f"{stderr.decode(errors='replace')[-2000:]}"
        )
    return parse_result(stdout), after - before
