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
A report holds at most ``MAX_RESULTS`` results, broken rules first, then passes, so a
namespace of thousands of pods stays far under etcd's object limit; the annotation
``gpu-admission.io/results-omitted`` says how many were left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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
POLICY_SOURCE = "gpu-admission.io/policy"

MAX_RESULTS = 500
MESSAGE_LIMIT = 512
"""Longest message of one result (a denial listing ten containers' reasons would be more)."""

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
    by_namespace: dict[str, list[Finding]] = {namespace: [] for namespace in namespaces}
    for finding in findings:
        by_namespace.setdefault(finding.subject.namespace, []).append(finding)
    return {
        namespace: policy_report(namespace, found, timestamp=timestamp, policy=policy)
        for namespace, found in sorted(by_namespace.items())
    }


def policy_report(
    namespace: str, findings: Iterable[Finding], *, timestamp: int, policy: str
) -> dict[str, Any]:
    """The PolicyReport of one namespace's findings."""
    summary = dict.fromkeys(SUMMARY_KEYS, 0)
    results: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for finding in findings:
        for key, result in _results(finding, timestamp):
            results.append((key, result))
        if not finding.rules:
            summary["error"] += 1
        for outcome in finding.rules:
            summary[RESULT_OF[outcome.outcome]] += 1
    results.sort(key=lambda pair: pair[0])
    kept = [result for _, result in results[:MAX_RESULTS]]
    annotations = {POLICY_SOURCE: policy}
    if len(results) > MAX_RESULTS:
        annotations[OMITTED] = str(len(results) - MAX_RESULTS)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {
            "name": REPORT_NAME,
            "namespace": namespace,
            "labels": {MANAGED_BY[0]: MANAGED_BY[1]},
            "annotations": annotations,
        },
        "summary": summary,
        "results": kept,
    }


def _results(finding: Finding, timestamp: int) -> Iterable[tuple[tuple[Any, ...], dict[str, Any]]]:
    subject = finding.subject
    order = (subject.kind, subject.name, subject.template)
    if not finding.rules:
        yield (
            (RANK["error"], *order, ""),
            _result(finding, "malformed-object", "error", "", timestamp),
        )
        return
    if finding.exemption:
        yield (
            (RANK["skip"], *order, ""),
            _result(finding, "exemption", "skip", finding.exemption, timestamp),
        )
    for index, outcome in enumerate(finding.rules):
        if outcome.outcome == "skip":
            continue
        result = RESULT_OF[outcome.outcome]
        message = "; ".join(outcome.messages) if outcome.messages else "passed"
        entry = _result(finding, outcome.rule, result, message, timestamp)
        if outcome.outcome in MODE_OF:
            entry["properties"]["mode"] = MODE_OF[outcome.outcome]
        yield (RANK[result], *order, index), entry


def _result(
    finding: Finding, rule: str, result: str, message: str, timestamp: int
) -> dict[str, Any]:
    subject = finding.subject
    resource = {
        "apiVersion": subject.api_version,
        "kind": subject.kind,
        "namespace": subject.namespace,
        "name": subject.name,
    }
    if subject.uid:
        resource["uid"] = subject.uid
    properties = {"template": subject.template} if subject.template else {}
    return {
        "source": SOURCE,
        "policy": POLICY,
        "rule": rule,
        "result": result,
        "message": shorten(message or finding.message, MESSAGE_LIMIT),
        "resources": [resource],
        "properties": properties,
        "timestamp": {"seconds": timestamp, "nanos": 0},
    }


def counts(reports: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The summaries of `reports` added up."""
    total = dict.fromkeys(SUMMARY_KEYS, 0)
    for report in reports.values():
        for key in SUMMARY_KEYS:
            total[key] += int(report["summary"].get(key, 0))
    return total
