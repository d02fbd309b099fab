"""What `benchmarks.apiserver` reads around each measured window, and the statistics of it.

- CPU time of a process and its descendants from ``/proc/PID/stat`` (utime + stime,
  and cutime + cstime for children already waited for), in seconds;
- kube-apiserver's admission histograms from its ``/metrics`` text: ``_sum`` and
  ``_count`` per value of one label, summed over the other labels, and their deltas;
- means, spreads and percentiles.

All pure functions of text and numbers except ``read_stat``/``tree_cpu_seconds``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

WEBHOOK_FAMILY = "apiserver_admission_webhook_admission_duration_seconds"
"""One observation per webhook call, labelled with the webhook's `name`."""
CONTROLLER_FAMILY = "apiserver_admission_controller_admission_duration_seconds"
"""One observation per admission plugin run, labelled with the plugin's `name`."""
ADMISSION_PLUGINS = (
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionWebhook",
    "MutatingAdmissionPolicy",
    "ValidatingAdmissionPolicy",
)


# ------------------------------------------------------------------ /proc


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/PID/stat this benchmark uses (times in clock ticks)."""

    pid: int
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int

    @property
    def ticks(self) -> int:
        return self.utime + self.stime + self.cutime + self.cstime


def parse_stat(text: str) -> Stat:
    """Parse /proc/PID/stat; the command name may hold spaces and parentheses, so the
    fields are counted from the last ')'."""
    head, _, rest = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = rest.split()
    # fields[0] is field 3 (state): ppid is field 4, utime..cstime fields 14..17.
    return Stat(
        pid=pid,
        ppid=int(fields[1]),
        utime=int(fields[11]),
        stime=int(fields[12]),
        cutime=int(fields[13]),
        cstime=int(fields[14]),
    )


def read_stat(pid: int) -> Stat | None:
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def all_stats() -> list[Stat]:
    stats = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_stat(int(entry))) is not None:
            stats.append(stat)
    return stats


def tree(root: int, stats: Iterable[Stat]) -> list[Stat]:
    """``root`` and its descendants among ``stats``."""
    by_parent: dict[int, list[Stat]] = {}
    own = None
    for stat in stats:
        by_parent.setdefault(stat.ppid, []).append(stat)
        if stat.pid == root:
            own = stat
    if own is None:
        return []
    found, pending = [], [own]
    while pending:
        stat = pending.pop()
        found.append(stat)
        pending += by_parent.get(stat.pid, [])
    return found


def tree_ticks(root: int, stats: Iterable[Stat]) -> int:
    """CPU of ``root`` and its descendants, those alive and those already waited for.

    A live child's time is in its own utime/stime; once waited for, in its parent's
    cutime/cstime; so the sum over the tree counts each once.
    """
    return sum(stat.ticks for stat in tree(root, stats))


def tree_cpu_seconds(roots: Mapping[str, int]) -> dict[str, float]:
    """CPU seconds so far of each named root process and its descendants."""
    stats = all_stats()
    return {name: tree_ticks(pid, stats) / CLOCK_TICKS for name, pid in roots.items()}


def children_matching(parent: int, *needles: str) -> list[int]:
    """Descendants of ``parent`` whose command line holds every one of ``needles``."""
    found = []
    for stat in tree(parent, all_stats()):
        try:
            argv = Path(f"/proc/{stat.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv]
        if all(any(needle == word for word in words) for needle in needles):
            found.append(stat.pid)
    return found


# ------------------------------------------------------------------ /metrics

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Totals:
    """A histogram's ``_sum`` (seconds) and ``_count``."""

    seconds: float = 0.0
    count: float = 0.0

    def __sub__(self, other: Totals) -> Totals:
        return Totals(self.seconds - other.seconds, self.count - other.count)

    @property
    def mean(self) -> float | None:
        return self.seconds / self.count if self.count > 0 else None


def histogram_totals(text: str, family: str, by: str = "name") -> dict[str, Totals]:
    """``_sum`` and ``_count`` of histogram ``family`` per value of label ``by``,
    summed over its other labels (operation, type, rejected)."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(family) or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        if name == f"{family}_sum":
            target = sums
        elif name == f"{family}_count":
            target = counts
        else:
            continue
        key = dict(_LABEL.findall(labels or "")).get(by, "")
        target[key] = target.get(key, 0.0) + float(value)
    return {
        key: Totals(sums.get(key, 0.0), counts.get(key, 0.0)) for key in sorted({*sums, *counts})
    }


def delta(after: Mapping[str, Totals], before: Mapping[str, Totals]) -> dict[str, Totals]:
    """What was observed between two scrapes, per label value (absent before: zero)."""
    return {
        key: totals - before.get(key, Totals())
        for key, totals in after.items()
        if (totals - before.get(key, Totals())).count > 0
    }


@dataclass(frozen=True)
class AdmissionMetrics:
    webhooks: dict[str, Totals]
    plugins: dict[str, Totals]


def admission_metrics(text: str) -> AdmissionMetrics:
    plugins = histogram_totals(text, CONTROLLER_FAMILY)
    return AdmissionMetrics(
        webhooks=histogram_totals(text, WEBHOOK_FAMILY),
        plugins={name: plugins[name] for name in ADMISSION_PLUGINS if name in plugins},
    )


def admission_delta(after: AdmissionMetrics, before: AdmissionMetrics) -> AdmissionMetrics:
    return AdmissionMetrics(
        webhooks=delta(after.webhooks, before.webhooks),
        plugins=delta(after.plugins, before.plugins),
    )


# ------------------------------------------------------------------ statistics


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def stdev(values: Sequence[float]) -> float:
    """Sample standard deviation (0 for fewer than two values)."""
    if len(values) < 2:
        return 0.0
    centre = mean(values)
    return math.sqrt(sum((v - centre) ** 2 for v in values) / (len(values) - 1))


def percentile(values: Sequence[float], fraction: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
