"""The scale benchmark's figures, the targets they are held to, and the Markdown it prints.

Nothing here measures or times anything: ``tests/benchmarks/test_scale.py`` runs it.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.common.report import markdown_table, number, percentile

LIMIT_MIB = 384
"""The chart's memory limit of a replica (deploy/helm/gpu-admission/values.yaml)."""
HEADROOM = 0.75
"""A replica's memory is under its limit "with room to spare" below this share of it."""
SYNC_TARGET_SECONDS = 30.0
CHURN_RATIO_TARGET = 2.0
REACHED_SHARE = 0.9
"""The churn's p99 is judged only when at least this share of its allocatable changes
reached the replica (as changes of its inventory): else the churn measured nothing."""
AUDIT_FLAT_TOLERANCE = 1.25
"""The audit's peak memory is flat in the pod count when the largest size's is within
this factor of the smallest's."""


@dataclass(frozen=True)
class Latency:
    """Review latencies (seconds) of one window, and how many reviews failed."""

    samples: tuple[float, ...]
    failed: int = 0
    due: int = 0
    """Reviews the window was to make; those not made had no time left in it."""

    @property
    def p50_ms(self) -> float:
        return percentile(self.samples, 0.50) * 1e3

    @property
    def p99_ms(self) -> float:
        return percentile(self.samples, 0.99) * 1e3

    @property
    def count(self) -> int:
        return len(self.samples)


@dataclass
class SizeFigures:
    """Everything measured at one size of the cluster."""

    nodes: int
    slices: int
    namespaces: int
    pods: int
    setup_seconds: float = math.nan
    sync_seconds: float = math.nan
    sync_peak_pss: float = math.nan
    synced_pss: float = math.nan
    idle: Latency = field(default_factory=lambda: Latency(()))
    churn: Latency = field(default_factory=lambda: Latency(()))
    churn_changes: int = 0
    churn_seconds: float = math.nan
    churn_failed: int = 0
    churn_events: int = 0
    """Node watch events the replica applied while the churn ran (and a second after)."""
    churn_snapshots: int = 0
    """Of those, the ones that changed its inventory: each a new snapshot."""
    churn_peak_pss: float = math.nan
    idle_full_collections: int | None = None
    churn_full_collections: int | None = None
    """The replica's full garbage collections (generation 2) in each window; None when it
    does not say."""
    audit_seconds: float = math.nan
    audit_peak_pss: float = math.nan
    audit_exit: int | None = None
    audit_requests: dict[str, int] = field(default_factory=dict)
    """Requests the audit made to kube-apiserver, by ``VERB resource``."""
    part_audit_pods: int = 0
    """At the largest size, the audit of the smallest size's namespaces only: its pods,"""
    part_audit_seconds: float = math.nan
    part_audit_peak_pss: float = math.nan
    """its time and peak PSS, over the same nodes (what the pod count alone costs)."""
    load: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """The load average as each part was measured (sync, idle, churn, audit)."""

    @property
    def churn_ratio(self) -> float:
        if not self.idle.samples or not self.churn.samples:
            return math.nan
        return self.churn.p99_ms / self.idle.p99_ms

    @property
    def churn_reached(self) -> float:
        """The share of the allocatable changes made (every other change) that the replica
        applied as a change of its inventory."""
        allocatable = self.churn_changes // 2
        return self.churn_snapshots / allocatable if allocatable else math.nan

    @property
    def churn_rate(self) -> float:
        return self.churn_changes / self.churn_seconds if self.churn_seconds else math.nan

    @property
    def replica_peak_pss(self) -> float:
        return max(self.sync_peak_pss, self.synced_pss, self.churn_peak_pss)

    @property
    def audit_pages(self) -> int:
        return self.audit_requests.get("LIST pods", 0)

    @property
    def audit_request_total(self) -> int:
        return sum(self.audit_requests.values())


# -- kube-apiserver's request counter ---------------------------------------------

AUDIT_VERBS = ("LIST", "GET")
"""What the audit asks of kube-apiserver; the WATCHes ending and lease renewals of
kube-apiserver's own controllers, counted too, are not its."""
_SAMPLE = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def request_counts(metrics: str) -> dict[str, int]:
    """kube-apiserver's ``apiserver_request_total`` of LISTs and GETs summed by ``VERB
    resource`` (the subresource after a slash), from its /metrics text."""
    counts: dict[str, int] = defaultdict(int)
    for line in metrics.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match["labels"]))
        resource = labels.get("resource", "")
        if not resource or labels.get("verb") not in AUDIT_VERBS:
            continue  # a non-resource URL (/metrics), or kube-apiserver's own work
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[f"{labels.get('verb', '?')} {resource}"] += int(float(match["value"]))
    return dict(counts)


def node_event_counts(metrics: str) -> tuple[int, int]:
    """A replica's node watch events applied and, of them, changes, from its /metrics
    text; (0, 0) for a replica that does not count them."""
    found = {"events": 0, "changes": 0}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.labels.get("kind") != "nodes":
                continue
            if sample.name == "gpu_admission_inventory_watch_events_total":
                found["events"] = int(sample.value)
            elif sample.name == "gpu_admission_inventory_changes_total":
                found["changes"] = int(sample.value)
    return found["events"], found["changes"]


def full_collections(metrics: str) -> int | None:
    """A replica's full garbage collections so far (``python_gc_collections_total`` of
    generation 2), from its /metrics text; None for a replica that does not say."""
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if (
                sample.name == "python_gc_collections_total"
                and sample.labels.get("generation") == "2"
            ):
                return int(sample.value)
    return None


def request_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The requests counted between two reads, the ones that grew only."""
    grown = {key: after[key] - before.get(key, 0) for key in after}
    return {key: value for key, value in sorted(grown.items()) if value > 0}


# -- the report --------------------------------------------------------------------


def _cell(value: float, digits: int = 1) -> str:
    return number(value, digits)


def _count(value: int | None) -> str:
    return "n/a" if value is None else f"{value:,}"


def _load(figures: SizeFigures, part: str) -> str:
    load = figures.load.get(part)
    return "n/a" if load is None else " / ".join(f"{value:.2f}" for value in load)


def table(sizes: Sequence[SizeFigures]) -> str:
    """One column per size, one row per figure."""
    rows: list[tuple[str, list[str]]] = [
        ("GPU nodes / ResourceSlices", [f"{s.nodes:,} / {s.slices:,}" for s in sizes]),
        ("pods / namespaces", [f"{s.pods:,} / {s.namespaces:,}" for s in sizes]),
        ("inventory sync from start, s", [_cell(s.sync_seconds) for s in sizes]),
        (
            "replica PSS synced / peak in sync, MiB",
            [_pair(s.synced_pss, s.sync_peak_pss) for s in sizes],
        ),
        ("  load average (1/5/15 min)", [_load(s, "sync") for s in sizes]),
        ("review idle p50 / p99, ms", [_pair(s.idle.p50_ms, s.idle.p99_ms, 2) for s in sizes]),
        ("  reviews made of due (failed)", [_made(s.idle) for s in sizes]),
        ("  full garbage collections", [_count(s.idle_full_collections) for s in sizes]),
        ("  load average", [_load(s, "idle") for s in sizes]),
        (
            "review under churn p50 / p99, ms",
            [_pair(s.churn.p50_ms, s.churn.p99_ms, 2) for s in sizes],
        ),
        ("  reviews made of due (failed)", [_made(s.churn) for s in sizes]),
        (
            "  node changes/s made (failed)",
            [f"{_cell(s.churn_rate)} ({s.churn_failed})" for s in sizes],
        ),
        (
            "  node events the replica applied (changes)",
            [f"{s.churn_events:,} ({s.churn_snapshots:,})" for s in sizes],
        ),
        ("  full garbage collections", [_count(s.churn_full_collections) for s in sizes]),
        ("  p99 churn / idle", [_cell(s.churn_ratio, 2) for s in sizes]),
        ("  replica PSS peak in churn, MiB", [_cell(s.churn_peak_pss) for s in sizes]),
        ("  load average", [_load(s, "churn") for s in sizes]),
        ("audit command, s", [_cell(s.audit_seconds) for s in sizes]),
        ("  peak PSS, MiB", [_cell(s.audit_peak_pss) for s in sizes]),
        ("  requests to kube-apiserver", [f"{s.audit_request_total:,}" for s in sizes]),
        ("  of them pod LIST pages", [f"{s.audit_pages:,}" for s in sizes]),
        (
            "  of the smallest size's pods only: pods, s, peak PSS MiB",
            [_part(s) for s in sizes],
        ),
        ("  exit status", ["n/a" if s.audit_exit is None else str(s.audit_exit) for s in sizes]),
        ("  load average", [_load(s, "audit") for s in sizes]),
    ]
    header = ["", *(f"{s.nodes:,} nodes" for s in sizes)]
    return markdown_table(header, [[name, *cells] for name, cells in rows])


def _part(figures: SizeFigures) -> str:
    if not figures.part_audit_pods:
        return "n/a"
    seconds, pss = _cell(figures.part_audit_seconds), _cell(figures.part_audit_peak_pss)
    return f"{figures.part_audit_pods:,}, {seconds}, {pss}"


def _made(latency: Latency) -> str:
    made = latency.count + latency.failed
    return f"{made:,} of {latency.due:,} ({latency.failed})"


def _pair(first: float, second: float, digits: int = 1) -> str:
    return f"{_cell(first, digits)} / {_cell(second, digits)}"


def request_lines(sizes: Sequence[SizeFigures]) -> list[str]:
    """The audit's requests to kube-apiserver by verb and resource, per size."""
    keys = sorted({key for s in sizes for key in s.audit_requests})
    return [
        f"- {key}: " + ", ".join(f"{s.audit_requests.get(key, 0):,}" for s in sizes) for key in keys
    ]


def verdicts(sizes: Sequence[SizeFigures]) -> list[str]:
    """Each target, met or missed, at each size (and the audit's flatness across them)."""
    lines = []
    budget = LIMIT_MIB * HEADROOM
    for s in sizes:
        at = f"{s.nodes:,} nodes"
        lines.append(
            _verdict(
                s.replica_peak_pss <= budget,
                f"{at}: replica peak PSS {_cell(s.replica_peak_pss)} MiB, under "
                f"{HEADROOM:.0%} of the chart's {LIMIT_MIB} MiB ({budget:.0f} MiB)",
            )
        )
        lines.append(
            _verdict(
                s.sync_seconds < SYNC_TARGET_SECONDS,
                f"{at}: inventory synced in {_cell(s.sync_seconds)} s, under "
                f"{SYNC_TARGET_SECONDS:.0f} s",
            )
        )
        if s.churn_reached < REACHED_SHARE:
            lines.append(
                f"- not measured: {at}: review p99 under churn, only {s.churn_snapshots:,} of "
                f"the {s.churn_changes // 2:,} allocatable changes made reached the replica"
            )
        else:
            lines.append(
                _verdict(
                    s.churn_ratio <= CHURN_RATIO_TARGET,
                    f"{at}: review p99 under churn {_cell(s.churn_ratio, 2)} times idle, "
                    f"within {CHURN_RATIO_TARGET:g} ({s.churn_snapshots:,} changes reached it)",
                )
            )
        lines.append(
            _verdict(
                s.audit_peak_pss <= budget,
                f"{at}: audit command peak PSS {_cell(s.audit_peak_pss)} MiB, under "
                f"{budget:.0f} MiB",
            )
        )
    for s in sizes:
        if not s.part_audit_pods or math.isnan(s.audit_peak_pss):
            continue
        growth = s.audit_peak_pss / s.part_audit_peak_pss
        lines.append(
            _verdict(
                growth <= AUDIT_FLAT_TOLERANCE,
                f"audit memory flat in the pod count, over {s.nodes:,} nodes: "
                f"{s.part_audit_pods:,} pods {_cell(s.part_audit_peak_pss)} MiB, "
                f"{s.pods:,} pods {_cell(s.audit_peak_pss)} MiB ({growth:.2f} times; "
                f"within {AUDIT_FLAT_TOLERANCE:g})",
            )
        )
    return lines


def _verdict(met: bool, text: str) -> str:
    return f"- {'met' if met else 'MISSED'}: {text}"


def chart_values(sizes: Iterable[SizeFigures]) -> list[str]:
    """The chart values to set where a replica's memory at the largest size is past the
    headroom of the default limit: a limit leaving the same headroom, and a request of
    what was measured."""
    ordered = sorted(sizes, key=lambda s: s.nodes)
    if not ordered:
        return []
    largest = ordered[-1]
    peak = largest.replica_peak_pss
    if math.isnan(peak) or peak <= LIMIT_MIB * HEADROOM:
        return []
    limit = math.ceil(peak / HEADROOM / 64) * 64
    request = math.ceil(peak / 32) * 32
    return [
        f"At {largest.nodes:,} nodes a replica peaked at {peak:.0f} MiB, past "
        f"{HEADROOM:.0%} of the default {LIMIT_MIB}Mi limit; set in the chart's values:",
        "",
        "    resources:",
        "      requests:",
        f"        memory: {request}Mi",
        "      limits:",
        f"        memory: {limit}Mi",
    ]
