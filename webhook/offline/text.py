"""The report of `gpu-admission check` for people.

`report_lines` (the default): one line per pod or pod template, ResourceClaimTemplate or
ResourceClaim (claim object), skipped object and file that could not be read, then a
summary. `report_text` (`--detailed`): one block per pod, then one per claim object, then
the skipped objects and unreadable files, then the summary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from webhook.engine.mutation_summary import injected
from webhook.offline.claim_documents import RESOURCES
from webhook.offline.claims_shown import asks_text, pod_claim_text
from webhook.offline.diff import mutation_diff
from webhook.offline.documents import ManifestError
from webhook.offline.evaluation import (
    ClaimObjectEvaluation,
    ObjectRef,
    PodEvaluation,
    Report,
    SkippedObject,
)

INDENT = "    "
VERDICT_WIDTH = len("skipped")


def report_text(report: Report, errors: Sequence[ManifestError] = ()) -> str:
    blocks = [pod_text(p) for p in report.pods]
    blocks += [claim_object_text(c) for c in report.claim_objects]
    blocks += [
        f"{s.object.source}:{s.object.line} {s.object.describe}: skipped ({s.reason})\n"
        for s in report.skipped
    ]
    blocks += [f"{error_where(e)}: ERROR ({e.reason})\n" for e in errors]
    return "\n".join([*blocks, summary_line(report, errors)])


def report_lines(
    report: Report, errors: Sequence[ManifestError] = (), only_denied: bool = False
) -> str:
    """A line per object: `DENIED  Job/ml/train /spec/template  jobs.yaml:3  gpu-count: ...`
    (verdict, kind/namespace/name, the template of a workload, where, and the first line of
    the denial or how many warnings) followed by its warnings as kubectl prints them, a
    line per file that could not be read, then the summary of everything (`only_denied`
    lists only the denied and the unreadable)."""
    lines: list[str] = []
    for pod in report.pods:
        if pod.allowed and only_denied:
            continue
        lines.append(pod_line(pod))
        lines += _warning_lines(pod.warnings)
    for claim in report.claim_objects:
        if claim.allowed and only_denied:
            continue
        lines.append(claim_object_line(claim))
        lines += _warning_lines(claim.warnings)
    if not only_denied:
        lines += [skipped_line(s) for s in report.skipped]
    lines += [error_line(e) for e in errors]
    return "".join(f"{line}\n" for line in lines) + summary_line(report, errors)


def pod_line(pod: PodEvaluation) -> str:
    """`DENIED   Job/ml/train /spec/template  jobs.yaml:3  gpu-count: ...` (no warnings)."""
    subject = _subject(pod.object) + (f" {pod.template}" if pod.template else "")
    return _line(pod.allowed, subject, pod.object, _reason(pod, pod.warnings))


def claim_object_line(claim: ClaimObjectEvaluation) -> str:
    """`allowed  ResourceClaimTemplate/ml/one-gpu  claims.yaml:1`, its warnings left out."""
    why = _first_line(claim.message) if not claim.allowed else _warned(claim.warnings)
    return _line(claim.allowed, _subject(claim.object), claim.object, why)


def skipped_line(skipped: SkippedObject) -> str:
    """`skipped  Service/llm-server  app.yaml:40  v1 Service has no pod template`."""
    return _columns("skipped", _subject(skipped.object), _where(skipped.object), skipped.reason)


def error_line(error: ManifestError) -> str:
    """`ERROR    broken.yaml:2  not valid YAML: ...`."""
    return _columns("ERROR", error_where(error), "", error.reason)


def error_where(error: ManifestError) -> str:
    """`file:line` of a manifest's problem, or `file` when no line is known."""
    return f"{error.source}:{error.line}" if error.line is not None else error.source


def _line(allowed: bool, subject: str, ref: ObjectRef, why: str) -> str:
    return _columns("allowed" if allowed else "DENIED", subject, _where(ref), why)


def _columns(verdict: str, subject: str, where: str, why: str) -> str:
    return "  ".join(part for part in (f"{verdict:<{VERDICT_WIDTH}}", subject, where, why) if part)


def _subject(ref: ObjectRef) -> str:
    """`Kind/namespace/name`, or `Kind/name` for an object without a namespace."""
    return "/".join(part for part in (ref.kind or "?", ref.namespace, ref.name or "?") if part)


def _where(ref: ObjectRef) -> str:
    return f"{ref.source}:{ref.line}"


def _reason(pod: PodEvaluation, warnings: tuple[str, ...]) -> str:
    """The first line of the denial (its first failed rule's first message, as the detailed
    report shows it), or what the mutation injected into an admitted pod and how many
    warnings it has."""
    if pod.allowed:
        names = injected(pod.patch)
        mutated = f"mutated: {', '.join(names)}" if names else ""
        return "; ".join(part for part in (mutated, _warned(warnings)) if part)
    for outcome in pod.rules:
        if outcome.outcome == "fail" and outcome.messages:
            return _first_line(f"{outcome.rule}: {outcome.messages[0]}")
    return _first_line(pod.message)


def _warning_lines(warnings: tuple[str, ...]) -> list[str]:
    return [f"{INDENT}Warning: {warning}" for warning in warnings]


def _warned(warnings: tuple[str, ...]) -> str:
    return _count(len(warnings), "warning") if warnings else ""


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


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


def summary_line(report: Report, errors: Sequence[ManifestError] = ()) -> str:
    """`9 pods and 3 pod templates: 5 allowed, 7 denied; 1 ResourceClaimTemplate and 1
    ResourceClaim: 1 allowed, 1 denied; 2 warnings; 1 object skipped; 1 file unreadable`:
    what was judged, each kind under its own word (a workload with several templates, such as
    a PyTorchJob, counts each), with no part for what is not there (`0 pods: 0 allowed, 0
    denied` when nothing was judged)."""
    parts: list[str] = []
    if report.pods or not report.claim_objects:
        templates = sum(1 for pod in report.pods if pod.is_template)
        judged = [(len(report.pods) - templates, "pod"), (templates, "pod template")]
        parts.append(_verdicts(judged, len(report.pods), report.denied))
    if report.claim_objects:
        kinds = [c.object.kind for c in report.claim_objects]
        judged = [(kinds.count(kind), kind) for kind in RESOURCES]
        parts.append(_verdicts(judged, len(kinds), report.claim_objects_denied))
    if report.warnings:
        parts.append(_count(report.warnings, "warning"))
    if report.skipped:
        parts.append(f"{_count(len(report.skipped), 'object')} skipped")
    if errors:
        parts.append(f"{_count(len(errors), 'file')} unreadable")
    return "; ".join(parts) + "\n"


def _verdicts(judged: list[tuple[int, str]], total: int, denied: int) -> str:
    """`9 pods and 3 pod templates: 5 allowed, 7 denied`; a noun counted 0 is left out, unless
    all are (`0 pods`)."""
    counted = [_count(number, noun) for number, noun in judged if number]
    if not counted:
        counted = [_count(0, judged[0][1])]
    return f"{' and '.join(counted)}: {total - denied} allowed, {denied} denied"


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
