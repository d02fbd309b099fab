"""The service's audit metrics and schedule (webhook.service.audit_schedule); the audit
itself runs against a real cluster in tests/e2e/test_audit.py."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from webhook.engine import RULES, Engine, RuleOutcome
from webhook.offline.audit import Finding, Subject
from webhook.service.audit import AuditRun
from webhook.service.audit_schedule import AuditMetrics, PeriodicAudit


def run_with(*findings: Finding) -> AuditRun:
    run = AuditRun(("ml",))
    for found in findings:
        run.summary.add(found)
    return run


def test_the_last_run_is_exported_by_rule_and_result_and_by_verdict() -> None:
    registry = CollectorRegistry()
    metrics = AuditMetrics(registry)
    denied = Finding(Subject("ml", "v1", "Pod", "p"), "denied", "no", (RuleOutcome("gpu-count", "fail", ("x",)),))  # fmt: skip

    metrics.record(run_with(denied, denied), ended=1_796_000_000.0, seconds=1.5)
    text = generate_latest(registry).decode()

    assert 'gpu_admission_audit_rule_results{result="fail",rule="gpu-count"} 2.0' in text
    assert 'gpu_admission_audit_verdicts{verdict="denied"} 2.0' in text
    assert 'gpu_admission_audit_runs_total{result="success"} 1.0' in text
    assert "gpu_admission_audit_duration_seconds 1.5" in text
    for rule in RULES.names:  # every rule has its series from the first run on
        assert f'gpu_admission_audit_rule_results{{result="pass",rule="{rule}"}}' in text


def test_a_later_run_replaces_the_counts_of_the_last() -> None:
    registry = CollectorRegistry()
    metrics = AuditMetrics(registry)
    denied = Finding(Subject("ml", "v1", "Pod", "p"), "denied", "no", (RuleOutcome("gpu-count", "fail", ("x",)),))  # fmt: skip

    metrics.record(run_with(denied), ended=1.0, seconds=1.0)
    metrics.record(run_with(), ended=2.0, seconds=1.0)
    metrics.failed()
    text = generate_latest(registry).decode()

    assert 'gpu_admission_audit_rule_results{result="fail",rule="gpu-count"} 0.0' in text
    assert 'gpu_admission_audit_runs_total{result="failure"} 1.0' in text
    assert "gpu_admission_audit_last_run_timestamp_seconds 2.0" in text


def test_an_interval_must_be_positive(engine: Engine) -> None:
    with pytest.raises(ValueError, match="positive"):
        PeriodicAudit(None, lambda: engine, 0, AuditMetrics(CollectorRegistry()))
