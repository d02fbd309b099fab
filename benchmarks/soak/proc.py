"""What the soak reads of the server from /proc, and how it judges growth.

Memory is summed over the server process and its descendants (the review worker that
judges large bodies, multiprocessing's resource tracker), from
/proc/PID/smaps_rollup: RSS counts the pages they share once per process, PSS splits
them among the sharers, as a cgroup charges them. Open file descriptors are the
entries of /proc/PID/fd, threads the `Threads:` line of /proc/PID/status, both of the
server process and of the whole tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.replica import process_tree

GROWTH_LIMIT_PERCENT = 10.0


def parse_smaps_rollup(text: str) -> tuple[int, int]:
    """RSS and PSS in KiB, from the text of /proc/PID/smaps_rollup."""
    rss = pss = 0
    for line in text.splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss, pss


def parse_threads(text: str) -> int:
    """The `Threads:` count of /proc/PID/status."""
    for line in text.splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise ValueError("no Threads: line")


def parse_cpu_ticks(text: str) -> int:
    """User plus system CPU time in clock ticks, from the text of /proc/PID/stat (fields 14
    and 15; the command name before them may hold spaces and parentheses)."""
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcessFigures:
    pid: int
    rss_kib: int
    pss_kib: int
    fds: int
    threads: int
    cpu_ticks: int = 0


@dataclass(frozen=True)
class Sample:
    """The server (the first process) and its descendants at one moment."""

    label: str
    reviews: int
    """Reviews sent so far, warm-up included."""
    seconds: float
    """Since the clients connected."""
    processes: tuple[ProcessFigures, ...]

    @property
    def rss_mib(self) -> float:
        return sum(p.rss_kib for p in self.processes) / 1024

    @property
    def pss_mib(self) -> float:
        return sum(p.pss_kib for p in self.processes) / 1024

    @property
    def server_pss_mib(self) -> float:
        return self.processes[0].pss_kib / 1024 if self.processes else 0.0

    @property
    def server_fds(self) -> int:
        return self.processes[0].fds if self.processes else 0

    @property
    def fds(self) -> int:
        return sum(p.fds for p in self.processes)

    @property
    def server_threads(self) -> int:
        return self.processes[0].threads if self.processes else 0

    @property
    def threads(self) -> int:
        return sum(p.threads for p in self.processes)

    @property
    def cpu_seconds(self) -> float:
        """CPU time the processes still there have used since they started."""
        return sum(p.cpu_ticks for p in self.processes) / TICKS_PER_SECOND


def cpu_share(first: Sample, second: Sample) -> float:
    """The CPU the tree used between two samples, as a share of one core (1.0: a core)."""
    wall = second.seconds - first.seconds
    return (second.cpu_seconds - first.cpu_seconds) / wall if wall > 0 else 0.0


def read_process(pid: int) -> ProcessFigures | None:
    """The figures of one process; None when it is gone."""
    base = Path(f"/proc/{pid}")
    try:
        rss, pss = parse_smaps_rollup((base / "smaps_rollup").read_text())
        threads = parse_threads((base / "status").read_text())
        fds = len(os.listdir(base / "fd"))
        ticks = parse_cpu_ticks((base / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None
    return ProcessFigures(pid, rss, pss, fds, threads, ticks)


def read_tree(root: int) -> tuple[ProcessFigures, ...]:
    """The server first, then its descendants still there."""
    found = (read_process(pid) for pid in process_tree(root))
    return tuple(f for f in found if f is not None)


def sample(label: str, root: int, reviews: int, seconds: float) -> Sample:
    return Sample(label, reviews, seconds, read_tree(root))


def memory_mib(root: int) -> tuple[float, float]:
    """Summed RSS and PSS of the tree, for the peak: cheaper than a whole sample."""
    rss = pss = 0
    for pid in process_tree(root):
        try:
            one = parse_smaps_rollup(Path(f"/proc/{pid}/smaps_rollup").read_text())
        except OSError:
            continue
        rss, pss = rss + one[0], pss + one[1]
    return rss / 1024, pss / 1024


def growth_percent(before: float, after: float) -> float:
    """How much `after` is above `before`, in % of `before` (negative when below)."""
    if before <= 0:
        raise ValueError("growth from nothing")
    return (after - before) / before * 100


@dataclass(frozen=True)
class Verdict:
    rss_percent: float
    pss_percent: float
    fds: int
    """Open descriptors at the end less after warm-up, summed over the tree."""
    threads: int
    """Threads at the end less after warm-up, summed over the tree."""
    processes: int
    limit_percent: float = GROWTH_LIMIT_PERCENT

    @property
    def memory_ok(self) -> bool:
        return self.rss_percent < self.limit_percent and self.pss_percent < self.limit_percent

    @property
    def ok(self) -> bool:
        return self.memory_ok and self.fds <= 0 and self.threads <= 0 and self.processes <= 0

    def sentences(self) -> list[str]:
        mark = "under" if self.memory_ok else "NOT under"
        return [
            f"memory growth after warm-up: RSS {self.rss_percent:+.1f}%, PSS "
            f"{self.pss_percent:+.1f}% (server and children): {mark} {self.limit_percent:g}%",
            f"open file descriptors: {self.fds:+d}, threads: {self.threads:+d}, processes: "
            f"{self.processes:+d} (end against after warm-up)",
            f"verdict: {'PASS' if self.ok else 'FAIL'}",
        ]


def changes(baseline: Sample, end: Sample) -> list[str]:
    """Per process (the server first), what changed in descriptors and threads; a
    process that came or went is named as such."""
    before = {p.pid: p for p in baseline.processes}
    after = {p.pid: p for p in end.processes}
    lines = []
    for pid in dict.fromkeys([*before, *after]):
        role = "server" if pid == baseline.processes[0].pid else "child"
        if pid not in after:
            lines.append(f"{role} {pid}: gone")
        elif pid not in before:
            lines.append(f"{role} {pid}: new ({after[pid].threads} threads)")
        elif (before[pid].fds, before[pid].threads) != (after[pid].fds, after[pid].threads):
            lines.append(
                f"{role} {pid}: fds {before[pid].fds} -> {after[pid].fds}, threads "
                f"{before[pid].threads} -> {after[pid].threads}"
            )
    return lines


def judge(baseline: Sample, end: Sample, limit: float = GROWTH_LIMIT_PERCENT) -> Verdict:
    """Growth from the sample after warm-up to the one at the end, both taken with the
    clients' connections open and idle."""
    return Verdict(
        rss_percent=growth_percent(baseline.rss_mib, end.rss_mib),
        pss_percent=growth_percent(baseline.pss_mib, end.pss_mib),
        fds=end.fds - baseline.fds,
        threads=end.threads - baseline.threads,
        processes=len(end.processes) - len(baseline.processes),
        limit_percent=limit,
    )


def sample_table(samples: Iterable[Sample], baseline: Sample | None = None) -> str:
    """A Markdown table of the samples; growth against `baseline` when given."""
    header = [
        "sample",
        "reviews",
        "s",
        "RSS MiB",
        "PSS MiB",
        "PSS vs warm-up",
        "server PSS MiB",
        "fds (server/all)",
        "threads (server/all)",
        "processes",
    ]
    lines = []
    for s in samples:
        versus = (
            f"{growth_percent(baseline.pss_mib, s.pss_mib):+.1f}%"
            if baseline is not None and baseline.pss_mib > 0
            else ""
        )
        lines.append(
            [
                s.label,
                f"{s.reviews:,}",
                f"{s.seconds:,.0f}",
                f"{s.rss_mib:.1f}",
                f"{s.pss_mib:.1f}",
                versus,
                f"{s.server_pss_mib:.1f}",
                f"{s.server_fds}/{s.fds}",
                f"{s.server_threads}/{s.threads}",
                str(len(s.processes)),
            ]
        )
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    out = []
    for index, row in enumerate([header, *lines]):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        out.append("| " + " | ".join(cells) + " |")
        if index == 0:
            out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)
