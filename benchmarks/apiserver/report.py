"""The results of `benchmarks.apiserver`: per-arm summaries and the markdown for BENCHMARKS.md.

Pure functions of the windows measured (``Sample``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from benchmarks.apiserver.metrics import ADMISSION_PLUGINS, Totals
from benchmarks.common.report import markdown_table, mean, number, percentile, stdev

CPU_PARTS = ("kube-apiserver", "etcd", "webhook", "client")


@dataclass
class Sample:
    """One arm's window in one round."""

    arm: str
    round: int
    position: int
    pods: int
    seconds: float
    latencies: list[float]
    errors: list[str]
    cpu_seconds: dict[str, float]
    """CPU seconds over the window, by ``CPU_PARTS`` (absent: no such process)."""
    webhooks: dict[str, Totals] = field(default_factory=dict)
    plugins: dict[str, Totals] = field(default_factory=dict)

    @property
    def pods_per_second(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Summary:
    arm: str
    rounds: int
    pods: int
    errors: int
    rate_mean: float
    rate_stdev: float
    rate_min: float
    rate_max: float
    ratio: float | None
    """Mean pods/s over the floor's mean pods/s (None without the floor)."""
    paired_ratio: float | None
    """Median over rounds of pods/s over the floor's pods/s in the same round."""
    p50_ms: float
    p99_ms: float
    cpu_ms_per_pod: dict[str, float]
    webhook_ms: dict[str, float]
    """Mean milliseconds per call, by webhook name."""
    webhook_calls_per_pod: dict[str, float]
    plugin_ms_per_pod: dict[str, float]
    """Milliseconds per pod spent in each admission plugin (all its calls)."""


def _sum_totals(totals: Sequence[Mapping[str, Totals]]) -> dict[str, Totals]:
    summed: dict[str, Totals] = {}
    for each in totals:
        for name, value in each.items():
            previous = summed.get(name, Totals())
            summed[name] = Totals(previous.seconds + value.seconds, previous.count + value.count)
    return summed


def summarize(samples: Sequence[Sample], arms: Sequence[str], floor: str = "none") -> list[Summary]:
    by_arm: dict[str, list[Sample]] = {arm: [] for arm in arms}
    for sample in samples:
        by_arm.setdefault(sample.arm, []).append(sample)
    floor_rates = {s.round: s.pods_per_second for s in by_arm.get(floor, [])}
    floor_mean = mean(list(floor_rates.values())) if floor_rates else math.nan
    summaries = []
    for arm in arms:
        own = by_arm[arm]
        if not own:
            continue
        rates = [s.pods_per_second for s in own]
        latencies = [latency for s in own for latency in s.latencies]
        created = len(latencies)
        paired = [
            s.pods_per_second / floor_rates[s.round] for s in own if floor_rates.get(s.round, 0) > 0
        ]
        cpu = {
            part: 1000 * sum(s.cpu_seconds[part] for s in own) / created
            for part in CPU_PARTS
            if created and all(part in s.cpu_seconds for s in own)
        }
        webhooks = _sum_totals([s.webhooks for s in own])
        plugins = _sum_totals([s.plugins for s in own])
        summaries.append(
            Summary(
                arm=arm,
                rounds=len(own),
                pods=created,
                errors=sum(len(s.errors) for s in own),
                rate_mean=mean(rates),
                rate_stdev=stdev(rates),
                rate_min=min(rates),
                rate_max=max(rates),
                ratio=mean(rates) / floor_mean if floor_rates and floor_mean > 0 else None,
                paired_ratio=percentile(paired, 0.5) if paired else None,
                p50_ms=1000 * percentile(latencies, 0.5),
                p99_ms=1000 * percentile(latencies, 0.99),
                cpu_ms_per_pod=cpu,
                webhook_ms={n: 1000 * t.mean for n, t in webhooks.items() if t.mean is not None},
                webhook_calls_per_pod={
                    n: t.count / created for n, t in webhooks.items() if created
                },
                plugin_ms_per_pod={
                    n: 1000 * plugins[n].seconds / created
                    for n in ADMISSION_PLUGINS
                    if n in plugins and created
                },
            )
        )
    return summaries


# ------------------------------------------------------------------ formatting


def throughput_table(summaries: Sequence[Summary], webhook_names: Sequence[str]) -> str:
    headers = [
        "arm",
        "pods/s (mean ± sd)",
        "min - max",
        "vs none",
        "paired",
        "p50 ms",
        "p99 ms",
        "apiserver CPU ms/pod",
        "etcd CPU ms/pod",
        "webhook CPU ms/pod",
        "client CPU ms/pod",
        "all CPU ms/pod",
        *(f"{short_webhook(n)} ms/call" for n in webhook_names),
    ]
    rows = []
    for s in summaries:
        rows.append(
            [
                f"`{s.arm}`",
                f"{number(s.rate_mean)} ± {number(s.rate_stdev)}",
                f"{number(s.rate_min)} - {number(s.rate_max)}",
                number(s.ratio, 2),
                number(s.paired_ratio, 2),
                number(s.p50_ms),
                number(s.p99_ms),
                number(s.cpu_ms_per_pod.get("kube-apiserver"), 2),
                number(s.cpu_ms_per_pod.get("etcd"), 2),
                number(s.cpu_ms_per_pod.get("webhook"), 2),
                number(s.cpu_ms_per_pod.get("client"), 2),
                number(sum(s.cpu_ms_per_pod.values()) if s.cpu_ms_per_pod else None, 2),
                *(number(s.webhook_ms.get(n), 2) for n in webhook_names),
            ]
        )
    return markdown_table(headers, rows)


def plugin_table(summaries: Sequence[Summary]) -> str:
    headers = ["arm", *(f"{p} ms/pod" for p in ADMISSION_PLUGINS)]
    rows = [
        [f"`{s.arm}`", *(number(s.plugin_ms_per_pod.get(p), 2) for p in ADMISSION_PLUGINS)]
        for s in summaries
    ]
    return markdown_table(headers, rows)


def short_webhook(name: str) -> str:
    """``mutate.gpu-admission.io`` -> ``mutate``."""
    return name.split(".", 1)[0]
