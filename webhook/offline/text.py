"""The report of `gpu-admission check` for people: one block per pod, then one per
ResourceClaimTemplate or ResourceClaim (claim object), then a summary."""

from __future__ import annotations

import json

from webhook.offline.claims_shown import asks_text, pod_claim_text
from webhook.offline.diff import mutation_diff
from webhook.offline.evaluation import ClaimObjectEvaluation, PodEvaluation, Report

INDENT = "    "


def report_text(report: Report) -> str:
    blocks = [pod_text(p) for p in report.pods]
    blocks += [claim_object_text(c) for c in report.claim_objects]
    blocks += [
        f"{s.object.source}:{s.object.line} {s.object.describe}: skipped ({s.reason})\n"
        for s in report.skipped
    ]
    return "\n".join([*blocks, summary_line(report)])


def pod_text(evaluation: PodEvaluation) -> str:
    ref = evaluation.object
    verdict = "allowed" if evaluation.allowed else "DENIED"
    workload = evaluation.workload_class
    lines = [
        f"{ref.source}:{ref.line} {evaluation.describe}: {verdict}"
        + (f" (class {workload})" if workload else " (no workload class)")
    ]
    if not evaluation.rules:
        lines.append(f"  {evaluation.message}")
        return _joined(lines)
    lines.append("  rules:")
    for outcome in evaluation.rules:
        label = "FAIL" if outcome.outcome == "fail" else outcome.outcome
        lines += [f"{INDENT}{label:<5} {outcome.rule}{_messages(outcome.messages)}"]
    if evaluation.claims:
        lines.append("  claims (Dynamic Resource Allocation):")
        lines += [f"{INDENT}{pod_claim_text(claim)}" for claim in evaluation.claims]
    lines += _warnings(evaluation.warnings)
    lines.append("  placement after mutation:")
    for landing in evaluation.landings:
        why = f": {'; '.join(landing.reasons)}" if landing.reasons else ""
        lines.append(f"{INDENT}{landing.reachable:<8}{landing.describe}{why}")
    if not evaluation.patch:
        lines.append("  mutation: none")
        return _joined(lines)
    lines.append("  mutation (JSONPatch):")
    lines += [f"{INDENT}{json.dumps(operation)}" for operation in evaluation.patch]
    lines.append("  mutation (diff):")
    diff = mutation_diff(evaluation.received, evaluation.mutated, evaluation.describe)
    lines += [f"{INDENT}{line}" for line in diff.splitlines()]
    return _joined(lines)


def claim_object_text(evaluation: ClaimObjectEvaluation) -> str:
    """The verdict on a claim object, what it asks for, and the denial or warnings."""
    ref = evaluation.object
    verdict = "allowed" if evaluation.allowed else "DENIED"
    lines = [f"{ref.source}:{ref.line} {evaluation.describe}: {verdict}"]
    if evaluation.asks is not None:
        lines.append(f"  asks: {asks_text(evaluation.asks)}")
    if evaluation.message:
        lines.append(f"  {evaluation.message}")
    lines += _warnings(evaluation.warnings)
    return _joined(lines)


def summary_line(report: Report) -> str:
    """`3 pods: 2 allowed, 1 denied; 1 claim object: 1 allowed, 0 denied; 2 warnings; 1 object
    skipped` (no claim objects, no warnings, no skipped objects: those parts left out)."""
    pods, denied = len(report.pods), report.denied
    parts = [f"{_count(pods, 'pod')}: {pods - denied} allowed, {denied} denied"]
    if report.claim_objects:
        claims, refused = len(report.claim_objects), report.claim_objects_denied
        parts.append(
            f"{_count(claims, 'claim object')}: {claims - refused} allowed, {refused} denied"
        )
    if report.warnings:
        parts.append(_count(report.warnings, "warning"))
    if report.skipped:
        parts.append(f"{_count(len(report.skipped), 'object')} skipped")
    return "; ".join(parts) + "\n"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _warnings(warnings: tuple[str, ...]) -> list[str]:
    if not warnings:
        return []
    return ["  warnings (kubectl prints them):", *(f"{INDENT}Warning: {w}" for w in warnings)]


def _messages(messages: tuple[str, ...]) -> str:
    if not messages:
        return ""
    if len(messages) == 1:
        return f": {messages[0]}"
    return "".join(f"\n{INDENT}{INDENT}- {message}" for message in messages)


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"
