"""CPU time of a process and its descendants from ``/proc/PID/stat`` (utime + stime, and
cutime + cstime for children already waited for), in seconds.

All pure functions of text and numbers except ``read_stat``/``all_stats``/``tree_cpu_seconds``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


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
