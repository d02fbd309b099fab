"""What an answered review counts as (webhook/http/counting.py): allowed, denied once per
enforced rule, or an error; warned, audited and exempted besides."""

from __future__ import annotations

import logging
import time

import pytest

from webhook.engine import Decision, Violation
from webhook.engine.decision import AUDIT, ENFORCE, EXEMPTION, WARN, Unjudged
from webhook.http.counting import Outcome, count, outcome_of
from webhook.http.judging import Asked, Judged
from webhook.http.metrics import Metrics


def violation(rule: str, mode: str = ENFORCE) -> Violation:
    return Violation(rule, f"{rule} broken", mode)


def test_a_review_without_a_decision_is_an_error() -> None:
    assert outcome_of(None) == Outcome("error", (), ())


def test_an_admission_counts_no_rule() -> None:
    assert outcome_of(Decision(allowed=True)) == Outcome("allowed", (), ())


def test_a_denial_counts_each_enforced_rule_once_in_the_order_found() -> None:
    decision = Decision(
        allowed=False,
        code=403,
        violations=(violation("gpu-count"), violation("model"), violation("gpu-count")),
    )

    assert outcome_of(decision) == Outcome("denied", ("gpu-count", "model"), ())


def test_a_refusal_only_by_rules_that_could_not_judge_is_an_error_of_those_rules() -> None:
    decision = Decision(
        allowed=False, code=403, violations=(Unjudged("non-gpu-placement", "no inventory"),)
    )

    assert outcome_of(decision) == Outcome("error", ("non-gpu-placement",), ())


def test_a_refusal_with_a_fault_of_the_objects_own_is_a_denial() -> None:
    decision = Decision(
        allowed=False,
        code=403,
        violations=(Unjudged("non-gpu-placement", "no inventory"), violation("priority")),
    )

    assert outcome_of(decision) == Outcome("denied", ("non-gpu-placement", "priority"), ())


def test_rules_in_warn_and_audit_mode_are_flagged_whatever_the_decision() -> None:
    found = (violation("priority", WARN), violation("model", AUDIT), violation("gpu-count"))

    allowed = outcome_of(Decision(allowed=True, violations=found[:2]))
    denied = outcome_of(Decision(allowed=False, code=403, violations=found))

    assert allowed.flagged == (("warned", "priority"), ("audited", "model"))
    assert denied.flagged == (("warned", "priority"), ("audited", "model"))
    assert denied.rules == ("gpu-count",)


def test_an_exempted_review_is_flagged_once_without_a_rule() -> None:
    decision = Decision(allowed=True, audit_annotations={EXEMPTION: "debugging"})

    assert outcome_of(decision).flagged == (("exempted", ""),)


def test_a_denial_is_counted_by_rule_and_logged_with_what_was_denied(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    decision = Decision(allowed=False, code=403, message="no", violations=(violation("model"),))
    judged = Judged(200, b"{}", Asked("u-1", "CREATE", "ml", "trainer"), decision=decision)

    with caplog.at_level(logging.INFO, logger="gpu_admission.http"):
        count(metrics, "validate", judged, time.perf_counter())

    labels = {"webhook": "validate", "operation": "CREATE", "decision": "denied", "rule": "model"}
    assert metrics.registry.get_sample_value("gpu_admission_requests_total", labels) == 1
    [record] = [r for r in caplog.records if r.getMessage() == "denied"]
    assert (record.uid, record.namespace, record.object) == ("u-1", "ml", "trainer")  # type: ignore[attr-defined]
    assert (record.rules, record.reason) == (["model"], "no")  # type: ignore[attr-defined]


def test_an_admission_is_counted_and_timed_without_a_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = Metrics()
    judged = Judged(200, b"{}", Asked("u-2", "CREATE"), decision=Decision(allowed=True))

    with caplog.at_level(logging.INFO, logger="gpu_admission.http"):
        count(metrics, "mutate", judged, time.perf_counter())

    labels = {"webhook": "mutate", "operation": "CREATE", "decision": "allowed", "rule": ""}
    assert metrics.registry.get_sample_value("gpu_admission_requests_total", labels) == 1
    duration = {"webhook": "mutate"}
    assert (
        metrics.registry.get_sample_value("gpu_admission_review_duration_seconds_count", duration)
        == 1
    )
    assert caplog.records == []
