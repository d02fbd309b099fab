"""The service's audit metrics and schedule (webhook.service.audit_schedule), and which
workloads a run leaves to their owners (webhook.service.audit); the audit itself runs
against a real cluster in tests/e2e/test_audit.py and tests/e2e/test_audit_bounds.py."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from webhook.engine import RULES, Engine, RuleOutcome
from webhook.engine.templates import POD, TemplateKind
from webhook.offline.audit import TOO_LARGE, Finding, Subject, subject_named, too_large
from webhook.service.audit import AuditRun, OwnerCheck, owners_first
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


def test_an_object_too_large_to_be_judged_is_exported_under_its_own_rule() -> None:
    registry = CollectorRegistry()
    metrics = AuditMetrics(registry)

    metrics.record(run_with(too_large(subject_named("ml", "apps/v1", "ReplicaSet", "r"), 9, 5)), ended=1.0, seconds=1.0)  # fmt: skip
    text = generate_latest(registry).decode()

    assert f'gpu_admission_audit_rule_results{{result="warn",rule="{TOO_LARGE}"}} 1.0' in text


# --- which workloads a run leaves to their owners (webhook.service.audit.OwnerCheck) ------


def owned(kind: str, name: str, owner: dict[str, Any] | None = None, uid: str = "") -> dict[str, Any]:  # fmt: skip
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": uid or f"uid-{name}"}
    if owner is not None:
        metadata["ownerReferences"] = [{"controller": True, "name": "o", **owner}]
    return {"kind": kind, "metadata": metadata}


def kind_of(engine: Engine, name: str) -> TemplateKind:
    return next(kind for kind in engine.kinds if kind.kind == name)


def test_owners_are_listed_before_the_kinds_they_usually_own(engine: Engine) -> None:
    order = [kind.kind for kind in owners_first(engine.kinds)]

    assert order[-2:] == ["ReplicaSet", "Job"]
    assert order.index("CronJob") < order.index("Job")
    assert order.index("JobSet") < order.index("Job")


def test_a_workload_is_left_only_to_an_owner_that_was_listed(engine: Engine) -> None:
    deployment, replica_set = kind_of(engine, "Deployment"), kind_of(engine, "ReplicaSet")
    check = OwnerCheck(engine.kinds, owners_first(engine.kinds))
    check.seen(owned("Deployment", "d", uid="d-1"), deployment)
    check.listed(deployment)

    real = owned("ReplicaSet", "r", {"apiVersion": "apps/v1", "kind": "Deployment", "uid": "d-1"})
    fake = owned("ReplicaSet", "f", {"apiVersion": "apps/v1", "kind": "Deployment", "uid": "made-up"})  # fmt: skip

    assert check.decide(real, replica_set) == "leave"
    assert check.decide(fake, replica_set) == "judge"  # its owner's kind was listed without it


def test_a_workload_whose_owner_kind_is_not_served_is_judged(engine: Engine) -> None:
    """A CronJob naming a JobSet as controller, on a cluster without JobSets: no garbage
    collector removes it, and the audit must not skip it."""
    cronjob = kind_of(engine, "CronJob")
    served = tuple(kind for kind in owners_first(engine.kinds) if kind.group != "jobset.x-k8s.io")
    check = OwnerCheck(engine.kinds, served)
    ghost = owned("CronJob", "c", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "uid": "j-1"})  # fmt: skip

    assert check.decide(ghost, cronjob) == "judge"


def test_a_workload_whose_owner_kind_is_still_to_be_listed_is_deferred_and_judged_if_it_never_comes(
    engine: Engine,
) -> None:
    job, jobset = kind_of(engine, "Job"), kind_of(engine, "JobSet")
    check = OwnerCheck(engine.kinds, (job, jobset))  # listed in this order
    left = owned("Job", "left", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "uid": "js-1"})  # fmt: skip
    orphan = owned("Job", "orphan", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "uid": "none"})  # fmt: skip

    assert check.decide(left, job) == "defer"
    assert check.decide(orphan, job) == "defer"
    check.listed(job)
    check.seen(owned("JobSet", "js", uid="js-1"), jobset)
    check.listed(jobset)

    assert [deferred.name for deferred in check.orphans()] == ["orphan"]


def test_pods_and_workloads_without_a_controller_are_judged(engine: Engine) -> None:
    check = OwnerCheck(engine.kinds, engine.kinds)
    pod = owned("Pod", "p", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "uid": "r-1"})
    check.seen(owned("ReplicaSet", "r", uid="r-1"), kind_of(engine, "ReplicaSet"))

    assert check.decide(pod, POD) == "judge"  # pods are always judged, owned or not
    assert check.decide(owned("Deployment", "d"), kind_of(engine, "Deployment")) == "judge"


def test_readiness_names_the_namespaces_the_last_audit_found_below_baseline(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    audit = PeriodicAudit(None, lambda: engine, 60, AuditMetrics(CollectorRegistry()))
    before = audit.pod_security_readiness()

    audit._report_pod_security({"ml": "pod-security.kubernetes.io/enforce=privileged"})
    audit._report_pod_security({"ml": "pod-security.kubernetes.io/enforce=privileged"})
    named = audit.pod_security_readiness()
    audit._report_pod_security({})
    mended = audit.pod_security_readiness()

    assert before == (True, "not audited yet")
    assert named == (
        True,
        "opted-in namespaces below Pod Security baseline: "
        "ml (pod-security.kubernetes.io/enforce=privileged)",
    )
    assert mended == (True, "every opted-in namespace enforces baseline or restricted")
    warnings = [r for r in caplog.records if "Pod Security baseline" in r.getMessage()]
    assert len(warnings) == 1  # once per change, not once per run
