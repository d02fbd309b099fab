"""What an answered review counts as in the metrics, and the log line of a denial.

A review is ``allowed``, ``denied`` (once per enforced rule it broke) or ``error``: no
decision (a body that is not a review, or an engine that failed), or one refused only by
rules that could not judge (``Decision.outcome``: no live inventory, an object that could
not be read), once per such rule; besides, it is
flagged once per rule it was warned or audited of, and once when a policy exemption
skipped it (see ``webhook.http.metrics`` for the series).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from webhook.engine import Decision
from webhook.engine.decision import AUDIT, ENFORCE, EXEMPTION, WARN
from webhook.http.judging import Judged
from webhook.http.metrics import Metrics

log = logging.getLogger("gpu_admission.http")


@dataclass(frozen=True)
class Outcome:
    """How one answered review is counted."""

    decision: str
    """``allowed``, ``denied`` or ``error``."""
    rules: tuple[str, ...]
    """The enforced rules a denial broke (or an error could not judge), once each; empty
    otherwise."""
    flagged: tuple[tuple[str, str], ...]
    """``(warned | audited, rule)`` per rule in those modes, ``(exempted, "")`` once."""


ALLOWED = Outcome("allowed", (), ())
"""Most reviews: allowed, nothing warned, audited or exempted."""
ERROR = Outcome("error", (), ())


def outcome_of(decision: Decision | None) -> Outcome:
    """How a review answered with ``decision`` (None: none was made) is counted."""
    if decision is None:
        return ERROR
    if decision.allowed and not decision.violations and not decision.audit_annotations:
        return ALLOWED
    flagged = [("warned", rule) for rule in _rules(decision, WARN)]
    flagged += [("audited", rule) for rule in _rules(decision, AUDIT)]
    if EXEMPTION in decision.audit_annotations:
        flagged.append(("exempted", ""))
    return Outcome(decision.outcome, _rules(decision, ENFORCE), tuple(flagged))


def count(metrics: Metrics, webhook: str, judged: Judged, started: float) -> None:
    """Count ``judged`` in ``metrics``, timed from ``started`` (``time.perf_counter``), and
    log it first if it is a denial."""
    outcome = outcome_of(judged.decision)
    if judged.decision is not None and not judged.decision.allowed:
        log_denial(judged, judged.decision, outcome)
    seconds = time.perf_counter() - started
    metrics.review(
        webhook, judged.asked.operation, outcome.decision, outcome.rules, seconds, outcome.flagged
    )


def log_denial(judged: Judged, decision: Decision, outcome: Outcome) -> None:
    """A denial at info; a refusal by rules that could not judge at warning: it is the
    service's view of the cluster that is missing, not the object at fault."""
    log.log(
        logging.WARNING if outcome.decision == "error" else logging.INFO,
        "could not judge" if outcome.decision == "error" else "denied",
        extra={
            "uid": judged.asked.uid,
            "namespace": judged.asked.namespace,
            "object": judged.asked.name,
            "rules": list(outcome.rules),
            "reason": decision.message,
        },
    )


def _rules(decision: Decision, mode: str) -> tuple[str, ...]:
    """The rules the decision found violated in `mode`, once each."""
    return tuple(dict.fromkeys(v.rule for v in decision.violations if v.mode == mode))
