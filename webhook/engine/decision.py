"""Outcomes of a review, as values. Only the HTTP edge turns them into wire form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ENFORCE = "enforce"
WARN = "warn"
AUDIT = "audit"

WARNING_LIMIT = 119
"""Longest warning: kubectl prints each as `Warning: ...`; under 120 characters."""

EXEMPTION = "exemption"
"""The auditAnnotations key holding the reason of a policy exemption."""

ECHO_LIMIT = 64
"""Most characters of a user's value a message repeats: the value is for recognising."""

VIOLATION_LIMIT = 1024
"""Longest message of one violation, whatever it echoes (a safety net under `echo`)."""

DENIAL_LIMIT = 8_000
"""Longest denial, with what says how long it was: reasons nested in reasons (ten templates
of a workload, each with ten violations) would otherwise reach ten times a violation's."""

REASONS_LIMIT = 10
"""Most reasons a denial or an audit annotation lists; the rest are counted."""

MALFORMED_LIMIT = 512
"""Longest reason of a malformed object (its path may hold keys the user chose)."""


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    """A stable rule name, e.g. `gpu-count`, for metrics, logs and policy modes."""
    message: str
    mode: str = ENFORCE
    """What the policy makes of it: `enforce` (deny), `warn` or `audit` (admit)."""


Outcome = Literal["pass", "fail", "warn", "audit", "skip"]
"""What became of one rule for one pod: `fail` for an enforced violation, `warn` or `audit`
for one the policy only warns of or audits, `pass` when the rule judged the pod and found
nothing, `skip` when the rule is not for such pods (see webhook.engine.rules)."""


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    rule: str
    outcome: Outcome
    messages: tuple[str, ...] = ()
    """The messages of its violations, in the order found; empty when it passed or skipped."""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    code: int = 200
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = field(default=())
    """Every violation found, whatever its mode."""
    audit_annotations: Mapping[str, str] = field(default_factory=dict)
    """Rule name (or `exemption`) -> what was recorded; kube-apiserver prefixes the keys."""
    rules: tuple[RuleOutcome, ...] = field(default=())
    """Each validation rule's outcome for the pod of a pod CREATE (every rule skipped when
    the pod is exempt); empty for anything else."""


def shorten(text: str, limit: int = ECHO_LIMIT) -> str:
    """`text`, or its first `limit` characters, `...` and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def echo(value: Any) -> str:
    """A user's value as a message quotes it (repr), shortened: a 1 MB value stays a few
    words, and says how long it was."""
    if isinstance(value, str) and len(value) > ECHO_LIMIT:
        return f"{value[:ECHO_LIMIT]!r}... ({len(value):,} characters)"
    return shorten(repr(value))


def reasons(messages: Sequence[str]) -> str:
    """`messages` joined by `; `, each once, the first `REASONS_LIMIT` of them and a count of
    the others: 45,000 containers breaking one rule make one readable message."""
    unique = list(dict.fromkeys(shorten(m, VIOLATION_LIMIT) for m in messages))
    listed = "; ".join(unique[:REASONS_LIMIT])
    more = len(unique) - REASONS_LIMIT
    return f"{listed}; and {more:,} more" if more > 0 else listed


def allow(patch: list[dict[str, Any]] | None = None) -> Decision:
    return Decision(allowed=True, patch=tuple(patch or ()))


def deny(violations: list[Violation], subject: str) -> Decision:
    message = shorten(f"{subject}: " + reasons([v.message for v in violations]), DENIAL_LIMIT)
    return Decision(allowed=False, code=403, message=message, violations=tuple(violations))


def judge(
    violations: Sequence[Violation],
    subject: str,
    message: str | None = None,
    rules: tuple[RuleOutcome, ...] = (),
) -> Decision:
    """Deny for the enforced violations, warn and audit the others.

    `message`, when given, replaces the denial's default message (subject and the enforced
    violations' messages). `rules` are the outcomes the violations came with, if any."""
    if not violations:
        return Decision(allowed=True, rules=rules)  # what the general path gives, sooner
    enforced = [v for v in violations if v.mode == ENFORCE]
    denial = ""
    if enforced:
        if message is None:
            message = f"{subject}: " + reasons([v.message for v in enforced])
        denial = shorten(message, DENIAL_LIMIT)
    return Decision(
        allowed=not enforced,
        code=403 if enforced else 200,
        message=denial,
        violations=tuple(violations),
        warnings=warnings_of(violations),
        audit_annotations=audit_annotations_of(violations),
        rules=rules,
    )


def exempt(reason: str, rules: tuple[RuleOutcome, ...] = ()) -> Decision:
    return Decision(allowed=True, audit_annotations={EXEMPTION: reason}, rules=rules)


def warnings_of(violations: Sequence[Violation]) -> tuple[str, ...]:
    """`gpu-admission: <rule>: <message>` per warned violation, cut short with `...`; the
    first `REASONS_LIMIT` of them and a count of the others."""
    found = []
    for violation in violations:
        if violation.mode == WARN:
            text = f"gpu-admission: {violation.rule}: {violation.message}"
            if len(text) > WARNING_LIMIT:
                text = text[: WARNING_LIMIT - 3].rstrip() + "..."
            found.append(text)
    unique = list(dict.fromkeys(found))
    if len(unique) > REASONS_LIMIT:
        unique[REASONS_LIMIT:] = [f"gpu-admission: and {len(unique) - REASONS_LIMIT:,} more"]
    return tuple(unique)


def audit_annotations_of(violations: Sequence[Violation]) -> dict[str, str]:
    """Rule -> its audited violations' messages, joined by `; `."""
    messages: dict[str, list[str]] = {}
    for violation in violations:
        if violation.mode == AUDIT:
            messages.setdefault(violation.rule, []).append(violation.message)
    return {rule: reasons(found) for rule, found in messages.items()}


def malformed(reason: str) -> Decision:
    return Decision(
        allowed=False, code=400, message=f"malformed object: {shorten(reason, MALFORMED_LIMIT)}"
    )


def too_large(reason: str) -> Decision:
    """A refusal of an object too large to judge in time (HTTP's 413, Request Entity Too
    Large, as the status code kube-apiserver shows)."""
    return Decision(allowed=False, code=413, message=f"object too large to judge: {reason}")
