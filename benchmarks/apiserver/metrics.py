"""What `benchmarks.apiserver` reads from kube-apiserver around each measured window:
its admission histograms from its ``/metrics`` text, ``_sum`` and ``_count`` per value of
one label, summed over the other labels, and their deltas. Pure functions of text.

The CPU time of the processes is read by ``benchmarks.common.processes``; means, spreads
and percentiles are ``benchmarks.common.report``'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

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
