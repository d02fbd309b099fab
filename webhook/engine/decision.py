"""Outcomes of a review, as values. Only the HTTP edge turns them into wire form."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.engine.mutation_summary import injected

ENFORCE = "enforce"
WARN = "warn"
AUDIT = "audit"

WARNING_LIMIT = 256
"""Longest warning, in characters: kube-apiserver passes a warning of up to 256 on whole
(it cuts each to 256 once the warnings of a response pass `WARNINGS_SIZE_LIMIT`)."""

WARNINGS_SIZE_LIMIT = 4096
"""Most bytes of `Warning` headers kube-apiserver writes for one request; past them it cuts
every warning to 256 characters, then drops those that still do not fit."""

WARNING_HEADER = len('299 - ""')
"""What a `Warning: 299 - "<text>"` header adds to the text (RFC 7234, as kube-apiserver
writes it)."""

WARNING_PREFIX = "gpu-admission: "
"""How each of our warnings starts, so a reader knows whose it is."""

PATH_LIMIT = 200
"""Longest template path a message names: a custom resource's map keys are the user's."""

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


@dataclass(frozen=True, slots=True)
class Unjudged(Violation):
    """A rule that could not judge: what it needs is missing (no live inventory of nodes)
    or could not be read (a claim, the pod a binding names). It refuses as a violation of
    its rule does, so the webhook fails closed, but it is no fault of the object's: the
    decision's outcome is `error`, counted and logged apart from denials (see
    `Decision.outcome`). Its message says what could not be known and what to do."""


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

    @property
    def outcome(self) -> Literal["allowed", "denied", "error"]:
        """`allowed`; `denied` for an enforced violation of the object's own; `error` when
        every enforced violation is a rule that could not judge (`Unjudged`)."""
        if self.allowed:
            return "allowed"
        enforced = [v for v in self.violations if v.mode == ENFORCE]
        if enforced and all(isinstance(v, Unjudged) for v in enforced):
            return "error"
        return "denied"


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


def subject(kind: str, namespace: str, name: str, quote: Callable[[str], str] = repr) -> str:
    """`gpu-admission denied CronJob 'ml/nightly'`: what every denial of `kind` ("pod",
    "update of pod", "binding of pod", a workload's or a claim's Kind) named `name` in
    `namespace` starts with, the one place its words are made. `quote` is `echo` where
    the name is not bounded by Kubernetes' own limits."""
    where = f"{namespace}/{name}" if namespace else name
    return f"gpu-admission denied {kind} {quote(where)}"


def denial(
    subject: str,
    messages: Sequence[str] = (),
    templates: Sequence[tuple[str, Sequence[str]]] = (),
) -> str:
    """The message of a denial, as kube-apiserver prints it after `denied the request: `.

    `<subject>: <reasons>` for the reasons `messages` of a pod (or any object judged whole);
    `<subject> template (<path>): <reasons>[; template (<path>): <reasons>]` for the pod
    templates of a workload, each a field path and its reasons. The webhook and the offline
    commands (check, explain, audit, policy test) form every denial here, so they say the
    same words. Cut to `DENIAL_LIMIT`, with what says how long it was."""
    if templates:
        text = f"{subject} " + reasons(
            [f"template ({shorten(path, PATH_LIMIT)}): {reasons(m)}" for path, m in templates]
        )
    else:
        text = f"{subject}: {reasons(messages)}"
    return shorten(text, DENIAL_LIMIT)


def allow(patch: list[dict[str, Any]] | None = None) -> Decision:
    return Decision(allowed=True, patch=tuple(patch or ()))


INJECTED = "injected"
"""The auditAnnotations key naming what a mutation injected (kube-apiserver records it
under the webhook's name: `mutate.gpu-admission.io/injected`)."""
POLICY_REVISION = "policy-revision"


def allow_injected(patch: list[dict[str, Any]], revision: str) -> Decision:
    """A mutation, with audit annotations naming what this review injected and the
    policy's revision: for a Pod, the annotations it writes on it (a pod made from a
    mutated template is annotated with the template's names as well)."""
    if not patch:
        return allow()
    annotations = {INJECTED: ",".join(injected(patch))}
    if revision:
        annotations[POLICY_REVISION] = revision
    return Decision(allowed=True, patch=tuple(patch), audit_annotations=annotations)


def deny(violations: list[Violation], subject: str) -> Decision:
    message = denial(subject, [v.message for v in violations])
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
    refusal = ""
    if enforced:
        refusal = (
            denial(subject, [v.message for v in enforced])
            if message is None
            else shorten(message, DENIAL_LIMIT)
        )
    return Decision(
        allowed=not enforced,
        code=403 if enforced else 200,
        message=refusal,
        violations=tuple(violations),
        warnings=warnings_of(violations),
        audit_annotations=audit_annotations_of(violations),
        rules=rules,
    )


def exempt(reason: str, rules: tuple[RuleOutcome, ...] = ()) -> Decision:
    return Decision(allowed=True, audit_annotations={EXEMPTION: reason}, rules=rules)


def warnings_of(violations: Sequence[Violation]) -> tuple[str, ...]:
    """`gpu-admission: <rule>: <message>` per warned violation (see `warning`), within what
    kube-apiserver passes on whole (see `within_limits`)."""
    return within_limits(warning(v.message, v.rule) for v in violations if v.mode == WARN)


QUOTED = re.compile(r"'[^']*'")
"""A name or value a message quotes (as `repr` or `echo` writes it)."""

QUOTED_KEPT = 8
"""Fewest characters of a quoted name or value a shortened warning keeps."""

ADVICE_KEPT = 40
"""Fewest characters of what is wrong a warning keeps before its advice."""


def warning(message: str, rule: str = "") -> str:
    """`gpu-admission: <rule>: <message>`, at most `WARNING_LIMIT` characters.

    A message says what is wrong, then after its last `; ` what to do or what would be
    accepted (`set it to one of: inference, training`). A warning too long keeps that
    advice whole and shortens what is wrong: first the names and values it quotes, the
    longest first, then its middle. Only advice too long to fit with `ADVICE_KEPT`
    characters before it is cut at its end."""
    prefix = f"{WARNING_PREFIX}{rule}: " if rule else WARNING_PREFIX
    text = prefix + message
    if len(text) <= WARNING_LIMIT:
        return text
    head, separator, advice = message.rpartition("; ")
    if not separator:
        head, advice = message, ""
    room = WARNING_LIMIT - len(prefix) - len(separator) - len(advice)
    if room < ADVICE_KEPT:
        return text[: WARNING_LIMIT - 3].rstrip() + "..."
    return prefix + _squeezed(head, room) + separator + advice


def _squeezed(text: str, room: int) -> str:
    """`text` in `room` characters: its longest quoted values cut first, then its middle."""
    while len(text) > room:
        quoted = [m for m in QUOTED.finditer(text) if len(m.group()) > QUOTED_KEPT + 5]
        if not quoted:
            break
        longest = max(quoted, key=lambda m: len(m.group()))
        inner = longest.group()[1:-1]
        keep = max(QUOTED_KEPT, len(inner) - (len(text) - room) - 3)
        text = f"{text[: longest.start()]}'{inner[:keep]}...'{text[longest.end() :]}"
    if len(text) > room:
        front = (room - 3 + 1) // 2
        back = room - 3 - front
        text = f"{text[:front]}...{text[len(text) - back :] if back else ''}"
    return text


def within_limits(warnings: Iterable[str]) -> tuple[str, ...]:
    """`warnings` once each, as many as kube-apiserver writes whole: at most
    `REASONS_LIMIT`, and their headers within `WARNINGS_SIZE_LIMIT` bytes; the others are
    counted in a last warning, `gpu-admission: and 3 more warnings`."""
    unique = list(dict.fromkeys(warnings))
    kept: list[str] = []
    size = 0
    for index, text in enumerate(unique):
        left = len(unique) - index - 1
        more = _header_size(_more(len(unique))) if left else 0
        cost = _header_size(text)
        if len(kept) == REASONS_LIMIT or size + cost + more > WARNINGS_SIZE_LIMIT:
            return (*kept, _more(len(unique) - len(kept)))
        kept.append(text)
        size += cost
    return tuple(kept)


def _more(count: int) -> str:
    return f"{WARNING_PREFIX}and {count:,} more warning{'' if count == 1 else 's'}"


def _header_size(text: str) -> int:
    """The bytes of `text`'s `Warning` header: quoted, `"` and `\\` escaped, UTF-8."""
    return WARNING_HEADER + len(text.encode()) + text.count('"') + text.count("\\")


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
