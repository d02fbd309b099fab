"""The report of `gpu-admission audit`: a summary for people, or plain data in a stable shape.

`--output json|yaml` prints an AuditReport:

    apiVersion: gpu-admission.io/v1alpha1
    kind: AuditReport
    policy: where the policy came from
    judgedAs: how each pod and workload was judged (see webhook.offline.audit)
    scope: {allNamespaces: bool, namespaces: [names audited],
            named: [names given with -n],               # only with -n
            notAudited: {name: why it was not audited}} # only with -n
    summary:
      judged: pods and pod templates judged
      objects: {Pod: N, Deployment: N, ...}
      verdicts: {denied: N, warned: N, audited: N, exempted: N, passed: N}
      rules: {gpu-count: {pass: N, fail: N, warn: N, audit: N, skip: N}, ...}
      namespaces: {ml: {judged: N, denied: N, warned: N, ...}, ...}
    unlisted: {kind: why it could not be listed}   # a kind forbidden, say
    results:                                        # denied ones only with --only-denied
      - {namespace, apiVersion, kind, name, template, verdict, message, exemption,
         rules: [{rule, outcome, messages}]}      # rules as `check` reports them

Every string of a result comes from what tenants wrote: names and template paths are
cut in the findings (``webhook.offline.audit``), messages and exemptions here
(``MESSAGE_LIMIT``), each saying how long it was, so a report grows with how many
objects were judged, never with how long their keys or values are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.decision import shorten
from webhook.offline.audit import JUDGED_AS, OUTCOMES, VERDICTS, AuditSummary, Finding

API_VERSION = "gpu-admission.io/v1alpha1"
KIND = "AuditReport"

MESSAGE_LIMIT = 1024
"""Longest message, exemption or rule message of one result."""

LISTED_VERDICTS = ("denied", "warned", "audited")
"""The verdicts the text report lists one by one; passed and exempted are counted only."""


@dataclass(frozen=True)
class AuditScope:
    all_namespaces: bool
    namespaces: tuple[str, ...]
    named: tuple[str, ...] = ()
    """The namespaces the audit was narrowed to (`audit -n`); empty when not narrowed."""
    not_audited: Mapping[str, str] = field(default_factory=dict)
    """Namespace named -> why it was not audited."""


@dataclass(frozen=True)
class AuditOutcome:
    """One audit: what was asked, what was found, what could not be read."""

    policy: str
    scope: AuditScope
    summary: AuditSummary
    findings: Sequence[Finding]
    """The findings kept for the report (every one, or the denied ones)."""
    unlisted: Mapping[str, str] = field(default_factory=dict)
    flavors: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Kueue ResourceFlavor -> what it says that the policy contradicts."""
    below_baseline: Mapping[str, str] = field(default_factory=dict)
    """Namespace audited -> why Pod Security is not known to enforce `baseline` in it."""


def audit_data(outcome: AuditOutcome) -> dict[str, Any]:
    summary = outcome.summary
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "policy": outcome.policy,
        "judgedAs": JUDGED_AS,
        "scope": _scope_data(outcome.scope),
        "summary": {
            "judged": summary.judged,
            "objects": summary.object_counts(),
            "verdicts": {verdict: summary.verdicts[verdict] for verdict in VERDICTS},
            "rules": {
                rule: {o: counts[o] for o in OUTCOMES} for rule, counts in summary.by_rule.items()
            },
            "namespaces": {
                namespace: {"judged": sum(counts.values())}
                | {verdict: counts[verdict] for verdict in VERDICTS}
                for namespace, counts in sorted(summary.by_namespace.items())
            },
        },
        "unlisted": dict(outcome.unlisted),
        "kueueFlavors": [
            {"name": name, "contradictions": [shorten(c, MESSAGE_LIMIT) for c in found]}
            for name, found in outcome.flavors.items()
        ],
        "belowPodSecurityBaseline": [
            {"namespace": namespace, "reason": why}
            for namespace, why in outcome.below_baseline.items()
        ],
        "results": [finding_data(f) for f in outcome.findings],
    }


def _scope_data(scope: AuditScope) -> dict[str, Any]:
    data: dict[str, Any] = {
        "allNamespaces": scope.all_namespaces,
        "namespaces": list(scope.namespaces),
    }
    if scope.named:
        data["named"] = list(scope.named)
        data["notAudited"] = dict(scope.not_audited)
    return data


def finding_data(finding: Finding) -> dict[str, Any]:
    subject = finding.subject
    return {
        "namespace": subject.namespace,
        "apiVersion": subject.api_version,
        "kind": subject.kind,
        "name": subject.name,
        "template": subject.template,
        "verdict": finding.verdict,
        "message": shorten(finding.message, MESSAGE_LIMIT),
        "exemption": shorten(finding.exemption, MESSAGE_LIMIT),
        "rules": [
            {
                "rule": r.rule,
                "outcome": r.outcome,
                "messages": [shorten(m, MESSAGE_LIMIT) for m in r.messages],
            }
            for r in finding.rules
        ],
    }


def audit_text(outcome: AuditOutcome, *, only_denied: bool = False) -> str:
    """A headline and how the pods were judged, counts by rule and by namespace, then the
    denied (and unless `only_denied`, warned and audited) objects one line each."""
    summary = outcome.summary
    lines = [headline(outcome), f"Judged: {JUDGED_AS}.", ""]
    lines += _table(
        ["RULE", *(o.upper() for o in OUTCOMES)],
        [[rule, *(counts[o] for o in OUTCOMES)] for rule, counts in summary.by_rule.items()],
    )
    lines.append("")
    lines += _table(
        ["NAMESPACE", "JUDGED", *(v.upper() for v in VERDICTS)],
        [
            [namespace, sum(counts.values()), *(counts[v] for v in VERDICTS)]
            for namespace, counts in sorted(summary.by_namespace.items())
        ],
    )
    for verdict in ("denied",) if only_denied else LISTED_VERDICTS:
        found = [f for f in outcome.findings if f.verdict == verdict]
        if found:
            lines += ["", f"{verdict.upper()} ({len(found):,}):"]
            lines += [f"  {f.subject.describe}: {_why(f)}" for f in found]
    if outcome.flavors:
        lines += ["", f"KUEUE FLAVORS THE POLICY CONTRADICTS ({len(outcome.flavors):,}):"]
        lines += [
            f"  ResourceFlavor {name!r}: {shorten('; '.join(found), MESSAGE_LIMIT)}"
            for name, found in outcome.flavors.items()
        ]
    if outcome.below_baseline:
        lines += [
            "",
            f"NAMESPACES BELOW POD SECURITY BASELINE ({len(outcome.below_baseline):,}): "
            "hostPath volumes and privileged containers of the pods no webhook judges are "
            "not refused there",
        ]
        lines += [f"  {namespace}: {why}" for namespace, why in outcome.below_baseline.items()]
    for namespace, reason in outcome.scope.not_audited.items():
        lines += ["", f"not audited: namespace {namespace!r}: {reason}"]
    for kind, reason in outcome.unlisted.items():
        lines += ["", f"not audited: {kind}: {reason}"]
    lines += ["", closing_line(summary)]
    return "\n".join(lines) + "\n"


def headline(outcome: AuditOutcome) -> str:
    summary = outcome.summary
    counts = sorted(summary.object_counts().items(), key=lambda item: item[0] != "Pod")
    objects = ", ".join(f"{n:,} {kind}{'' if n == 1 else 's'}" for kind, n in counts)
    scope = outcome.scope
    where = (
        f"{len(scope.namespaces):,} namespace{'' if len(scope.namespaces) == 1 else 's'} named"
        if scope.named
        else "every namespace the webhooks could cover"
        if scope.all_namespaces
        else f"{len(scope.namespaces):,} opted-in namespace"
        + ("" if len(scope.namespaces) == 1 else "s")
    )
    return (
        f"gpu-admission audit of {objects or 'nothing'} in {where} "
        f"({summary.judged:,} pods and pod templates judged; policy {outcome.policy})"
    )


def closing_line(summary: AuditSummary) -> str:
    counts = ", ".join(f"{summary.verdicts[v]:,} {v}" for v in VERDICTS)
    return f"{summary.denied:,} of {summary.judged:,} would be denied ({counts})"


def _why(finding: Finding) -> str:
    if finding.verdict == "denied":
        return shorten(finding.message, MESSAGE_LIMIT)
    outcome = {"warned": "warn", "audited": "audit"}.get(finding.verdict)
    broken = [r for r in finding.rules if r.outcome == outcome]
    return shorten("; ".join(f"{r.rule}: {'; '.join(r.messages)}" for r in broken), MESSAGE_LIMIT)


def _table(header: list[str], rows: Iterable[list[Any]]) -> list[str]:
    cells = [header, *([f"{c:,}" if isinstance(c, int) else str(c) for c in r] for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
