"""The report of `gpu-admission check` for people: one block per pod, then a summary."""

from __future__ import annotations

import json

from webhook.offline.diff import mutation_diff
from webhook.offline.evaluation import PodEvaluation, Report

INDENT = "    "


def report_text(report: Report) -> str:
    blocks = [pod_text(p) for p in report.pods]
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
    if evaluation.warnings:
        lines.append("  warnings (kubectl prints them):")
        lines += [f"{INDENT}Warning: {warning}" for warning in evaluation.warnings]
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


def summary_line(report: Report) -> str:
    """`3 pods: 2 allowed, 1 denied; 2 warnings; 1 object skipped` (no warnings, no skipped
    objects: those parts left out)."""
    pods, denied = len(report.pods), report.denied
    parts = [f"{_count(pods, 'pod')}: {pods - denied} allowed, {denied} denied"]
    if report.warnings:
        parts.append(_count(report.warnings, "warning"))
    if report.skipped:
        parts.append(f"{_count(len(report.skipped), 'object')} skipped")
    return "; ".join(parts) + "\n"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _messages(messages: tuple[str, ...]) -> str:
    if not messages:
        return ""
    if len(messages) == 1:
        return f": {messages[0]}"
    return "".join(f"\n{INDENT}{INDENT}- {message}" for message in messages)


def _joined(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"
