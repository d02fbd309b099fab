"""An audit's findings as PolicyReports: one per namespace, in the wg-policy API.

The PolicyReport kind (``wgpolicyk8s.io/v1alpha2``) is the Kubernetes policy working
group's common report, read by dashboards and by ``kubectl get policyreports``. Each
audited namespace gets one, named ``gpu-admission``, with a result per object and rule:

- ``fail``: the rule is enforced and broken, the webhooks would refuse the object;
- ``warn``: the rule is broken and the policy only warns of it or audits it
  (``properties.mode`` says which);
- ``pass``: the rule judged the object and found nothing;
- ``skip``: listed once per exempted object (rule ``exemption``, with its reason);
  a rule that is not for an object (a GPU rule for a pod of no class) is only counted;
- ``error``: the object cannot be read (rule ``malformed-object``).

``summary`` counts every rule of every judged pod and pod template, whatever is listed.
A report is a Kubernetes object, which etcd stores only under 1.5 MiB, so it is bounded
twice: at most ``MAX_RESULTS`` results, and at most ``MAX_RESULTS_BYTES`` of their JSON,
broken rules first, then passes. Every string a result copies from what tenants wrote
is cut (``TEXT_LIMIT``, ``MESSAGE_LIMIT``; names and template paths are already cut in
the findings, and cut again here), so one result is at most about 1.5 KB and a
report stays under a third of the limit whatever the namespace holds. The annotation
``gpu-admission.io/results-omitted`` says how many results were left out and
``gpu-admission.io/results-omitted-by-result`` which (``fail=0,warn=3,pass=1200``).
Findings are folded in as they come (``ReportResults``): an audit of any size holds
per namespace only the counts and the results it will publish.
"""

from __future__ import annotations

import functools
import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson

from webhook.engine import RuleOutcome
from webhook.engine.decision import shorten
from webhook.offline.audit import Finding

GROUP = "wgpolicyk8s.io"
VERSION = "v1alpha2"
PLURAL = "policyreports"
KIND = "PolicyReport"
REPORT_NAME = "gpu-admission"
POLICY = "gpu-admission"
SOURCE = "gpu-admission"
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpu-admission")
OMITTED = "gpu-admission.io/results-omitted"
OMITTED_BY_RESULT = "gpu-admission.io/results-omitted-by-result"
POLICY_SOURCE = "gpu-admission.io/policy"

MAX_RESULTS = 500
MAX_RESULTS_BYTES = 512 * 1024
"""Most JSON of one report's results: a third of what etcd stores by default (1.5 MiB)."""
MESSAGE_LIMIT = 512
"""Longest message of one result (a denial listing ten containers' reasons would be more)."""
TEXT_LIMIT = 253
"""Longest name, namespace, uid, apiVersion, kind or rule of one result."""
TEMPLATE_LIMIT = 256
"""Longest template field path of one result."""

RESULT_OF = {"fail": "fail", "warn": "warn", "audit": "warn", "pass": "pass", "skip": "skip"}
MODE_OF = {"fail": "enforce", "warn": "warn", "audit": "audit"}
RANK = {"error": 0, "fail": 1, "warn": 2, "skip": 3, "pass": 4}
"""The order results are listed in, and kept in when there are too many."""
SUMMARY_KEYS = ("pass", "fail", "warn", "error", "skip")


def policy_reports(
    findings: Iterable[Finding],
    namespaces: Iterable[str],
    *,
    timestamp: int,
    policy: str,
) -> dict[str, dict[str, Any]]:
    """Namespace -> its PolicyReport, for every namespace in `namespaces` (a namespace with
    nothing judged gets an empty one: it was audited) and every finding's namespace.
    `timestamp` is when the audit ran, in seconds since the epoch; `policy` where the
    policy came from."""
    collected = ReportResults()
    for finding in findings:
        collected.add(finding)
    return collected.reports(namespaces, timestamp=timestamp, policy=policy)


def policy_report(
    namespace: str, findings: Iterable[Finding], *, timestamp: int, policy: str
) -> dict[str, Any]:
    """The PolicyReport of one namespace's findings."""
    kept = _Kept()
    for finding in findings:
        kept.add(finding)
    return kept.report(namespace, timestamp=timestamp, policy=policy)


class ReportResults:
    """Findings folded into reports as they come, for an audit of any size: of each
    namespace only its summary counts and its first ``max_results`` results (broken
    rules first, ``max_bytes`` of JSON at most) are held, never every finding."""

    def __init__(self, max_results: int = MAX_RESULTS, max_bytes: int = MAX_RESULTS_BYTES) -> None:
        self._max_results = max_results
        self._max_bytes = max_bytes
        self._namespaces: dict[str, _Kept] = {}

    def add(self, finding: Finding) -> None:
        namespace = finding.subject.namespace
        kept = self._namespaces.get(namespace)
        if kept is None:
            kept = self._namespaces[namespace] = _Kept(self._max_results, self._max_bytes)
        kept.add(finding)

    def reports(
        self, namespaces: Iterable[str], *, timestamp: int, policy: str
    ) -> dict[str, dict[str, Any]]:
        """Namespace -> its PolicyReport, as ``policy_reports`` makes them."""
        every = dict.fromkeys(namespaces, None) | dict.fromkeys(self._namespaces, None)
        return {
            namespace: self._namespaces.get(namespace, _Kept()).report(
                namespace, timestamp=timestamp, policy=policy
            )
            for namespace in sorted(every)
        }


class _Entry:
    """A result kept, ordered worst kept first: the heap's top is the one to drop next."""

    __slots__ = ("key", "result", "size")

    def __init__(self, key: tuple[Any, ...], result: dict[str, Any]) -> None:
        self.key = key
        self.result = result
        self.size = len(orjson.dumps(result))

    def __lt__(self, other: _Entry) -> bool:
        return bool(self.key > other.key)


class _Kept:
    """One namespace's summary and its first results by ``RANK`` and object, at most
    ``max_results`` of them and ``max_bytes`` of their JSON, in a heap; a result that
    would be dropped at once is never built."""

    def __init__(self, max_results: int = MAX_RESULTS, max_bytes: int = MAX_RESULTS_BYTES):
        self.max_results = max_results
        self.max_bytes = max_bytes
        self.summary = dict.fromkeys(SUMMARY_KEYS, 0)
        self.heap: list[_Entry] = []
        self.bytes = 0
        """JSON of the results kept."""
        self.total = 0
        """Results met, kept or not."""
        self.omitted: Counter[str] = Counter()
        """Results left out, by result."""

    def add(self, finding: Finding) -> None:
        if not finding.rules:
            self.summary["error"] += 1
        for outcome in finding.rules:
            self.summary[RESULT_OF[outcome.outcome]] += 1
        for key, build in _results(finding, self.total):
            self.total += 1
            full = len(self.heap) >= self.max_results or self.bytes >= self.max_bytes
            if full and (not self.heap or key >= self.heap[0].key):
                self.omitted[_RESULT_OF_RANK[key[0]]] += 1
                continue
            entry = _Entry(key, build())
            heapq.heappush(self.heap, entry)
            self.bytes += entry.size
            while self.heap and (len(self.heap) > self.max_results or self.bytes > self.max_bytes):
                dropped = heapq.heappop(self.heap)
                self.bytes -= dropped.size
                self.omitted[_RESULT_OF_RANK[dropped.key[0]]] += 1

    def report(self, namespace: str, *, timestamp: int, policy: str) -> dict[str, Any]:
        stamp = {"seconds": timestamp, "nanos": 0}
        kept = sorted(self.heap, key=lambda entry: entry.key)
        annotations = {POLICY_SOURCE: _cut(policy, MESSAGE_LIMIT)}
        if self.total > len(kept):
            annotations[OMITTED] = str(self.total - len(kept))
            annotations[OMITTED_BY_RESULT] = ",".join(
                f"{result}={self.omitted[result]}" for result in RANK if self.omitted[result]
            )
        return {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {
                "name": REPORT_NAME,
                "namespace": namespace,
                "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
                "annotations": annotations,
            },
            "summary": dict(self.summary),
            "results": [{**entry.result, "timestamp": dict(stamp)} for entry in kept],
        }


_RESULT_OF_RANK = {rank: result for result, rank in RANK.items()}


Build = Callable[[], dict[str, Any]]


def _results(finding: Finding, sequence: int) -> Iterator[tuple[tuple[Any, ...], Build]]:
    """(sort key, how to build the result) of each result of `finding`; `sequence` (results
    met before) keeps the order of equal keys and spares comparing anything else."""
    subject = finding.subject
    order = (subject.kind, subject.name, subject.template)
    if not finding.rules:
        yield (
            (RANK["error"], *order, -1, sequence),
            lambda: _result(finding, "malformed-object", "error", ""),
        )
        return
    if finding.exemption:
        yield (
            (RANK["skip"], *order, -1, sequence),
            lambda: _result(finding, "exemption", "skip", finding.exemption),
        )
        sequence += 1
    for index, outcome in enumerate(finding.rules):
        if outcome.outcome == "skip":
            continue
        yield (
            (RANK[RESULT_OF[outcome.outcome]], *order, index, sequence),
            functools.partial(_rule_result, finding, outcome),
        )
        sequence += 1


def _rule_result(finding: Finding, outcome: RuleOutcome) -> dict[str, Any]:
    result = RESULT_OF[outcome.outcome]
    message = _joined(outcome.messages) if outcome.messages else "passed"
    entry = _result(finding, outcome.rule, result, message)
    if outcome.outcome in MODE_OF:
        entry["properties"]["mode"] = MODE_OF[outcome.outcome]
    return entry


def _result(finding: Finding, rule: str, result: str, message: str) -> dict[str, Any]:
    """One result but its timestamp, set when the report is made."""
    subject = finding.subject
    resource = {
        "apiVersion": _cut(subject.api_version),
        "kind": _cut(subject.kind),
        "namespace": _cut(subject.namespace),
        "name": _cut(subject.name),
    }
    if subject.uid:
        resource["uid"] = _cut(subject.uid)
    properties = {"template": _cut(subject.template, TEMPLATE_LIMIT)} if subject.template else {}
    return {
        "source": SOURCE,
        "policy": POLICY,
        "rule": _cut(rule),
        "result": result,
        "message": _cut(message or finding.message, MESSAGE_LIMIT),
        "resources": [resource],
        "properties": properties,
    }


def _cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters saying how long it was, once: a string already
    cut (``... (N characters)``) is left as it is when within a little of the limit."""
    return text if len(text) <= limit + 32 else shorten(text, limit)


def _joined(messages: Iterable[str]) -> str:
    """The messages joined by ``; ``, no more of them than the result's message keeps."""
    joined = ""
    for message in messages:
        joined = f"{joined}; {message}" if joined else message
        if len(joined) > MESSAGE_LIMIT:
            break
    return joined


def counts(reports: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The summaries of `reports` added up."""
    total = dict.fromkeys(SUMMARY_KEYS, 0)
    for report in reports.values():
        for key in SUMMARY_KEYS:
            total[key] += int(report["summary"].get(key, 0))
    return total
