"""PolicyReports of an audit's findings (webhook.offline.policy_report)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from webhook.engine import RuleOutcome
from webhook.kube import policy_reports as publishing
from webhook.offline import policy_report
from webhook.offline.audit import Finding, Subject
from webhook.offline.policy_report import MAX_RESULTS, counts, policy_reports

NOW = 1_796_000_000


def finding(name: str, verdict: str = "passed", namespace: str = "ml", **outcomes: str) -> Finding:
    rules = tuple(
        RuleOutcome(rule.replace("_", "-"), outcome, () if outcome in ("pass", "skip") else (f"{rule} broken",))  # type: ignore[arg-type]
        for rule, outcome in outcomes.items()
    )  # fmt: skip
    return Finding(Subject(namespace, "v1", "Pod", name, f"uid-{name}"), verdict, "", rules)  # type: ignore[arg-type]


def reports(*findings: Finding, namespaces: tuple[str, ...] = ("ml",)) -> dict[str, Any]:
    return policy_reports(findings, namespaces, timestamp=NOW, policy="policies/default.yaml")


def test_one_report_per_namespace_named_gpu_admission_even_with_nothing_in_it() -> None:
    found = reports(finding("a", namespace="ml"), namespaces=("ml", "empty"))

    assert sorted(found) == ["empty", "ml"]
    empty = found["empty"]
    assert empty["apiVersion"] == "wgpolicyk8s.io/v1alpha2"
    assert empty["kind"] == "PolicyReport"
    assert empty["metadata"]["name"] == "gpu-admission"
    assert empty["metadata"]["namespace"] == "empty"
    assert empty["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-admission"}
    assert empty["summary"] == {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
    assert empty["results"] == []


def test_each_rule_of_each_object_is_a_result_with_its_mode_but_skips_are_only_counted() -> None:
    [report] = reports(
        finding("x", "denied", gpu_count="fail", mig_profile="warn", priority_class="audit",
                visible_devices="pass", non_gpu_placement="skip"),
    ).values()  # fmt: skip

    assert report["summary"] == {"pass": 1, "fail": 1, "warn": 2, "error": 0, "skip": 1}
    assert [(r["rule"], r["result"], r["properties"]) for r in report["results"]] == [
        ("gpu-count", "fail", {"mode": "enforce"}),
        ("mig-profile", "warn", {"mode": "warn"}),
        ("priority-class", "warn", {"mode": "audit"}),
        ("visible-devices", "pass", {}),
    ]
    first = report["results"][0]
    assert first["policy"] == first["source"] == "gpu-admission"
    assert first["message"] == "gpu_count broken"
    assert first["resources"] == [
        {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "x", "uid": "uid-x"}
    ]
    assert first["timestamp"] == {"seconds": NOW, "nanos": 0}


def test_a_template_is_named_in_the_properties_of_its_workload_results() -> None:
    subject = Subject("ml", "apps/v1", "Deployment", "d", "uid", "spec.template")
    deployment = Finding(subject, "denied", "no", (RuleOutcome("gpu-count", "fail", ("x",)),))

    [result] = reports(deployment)["ml"]["results"]

    assert result["properties"] == {"template": "spec.template", "mode": "enforce"}


def test_an_unreadable_object_is_an_error_and_an_exempted_one_a_skip_with_its_reason() -> None:
    unreadable = Finding(Subject("ml", "v1", "Pod", "bad"), "denied", "malformed object: spec")
    exempted = Finding(
        Subject("ml", "v1", "Pod", "old"), "exempted", "", (RuleOutcome("gpu-count", "skip"),),
        "legacy",
    )  # fmt: skip

    report = reports(unreadable, exempted)["ml"]

    assert [(r["rule"], r["result"], r["message"]) for r in report["results"]] == [
        ("malformed-object", "error", "malformed object: spec"),
        ("exemption", "skip", "legacy"),
    ]
    assert report["summary"]["error"] == 1 and report["summary"]["skip"] == 1


def test_broken_rules_come_first_and_the_results_stop_at_the_cap_saying_how_many_were_left() -> (
    None
):
    many = [finding(f"ok-{i:04}", visible_devices="pass") for i in range(MAX_RESULTS)]
    broken = finding("zz-broken", "denied", visible_devices="fail")

    report = reports(*many, broken)["ml"]

    assert len(report["results"]) == MAX_RESULTS
    assert report["results"][0]["resources"][0]["name"] == "zz-broken"
    assert report["metadata"]["annotations"]["gpu-admission.io/results-omitted"] == "1"
    assert report["summary"]["pass"] == MAX_RESULTS and report["summary"]["fail"] == 1


def test_long_messages_are_cut_short_saying_how_long_they_were() -> None:
    long = Finding(Subject("ml", "v1", "Pod", "p"), "denied", "", (RuleOutcome("gpu-count", "fail", ("x" * 5000,)),))  # fmt: skip

    [result] = reports(long)["ml"]["results"]

    assert len(result["message"]) < 600
    assert result["message"].endswith("(5,000 characters)")


def test_counts_add_up_the_summaries() -> None:
    found = reports(
        finding("a", "denied", namespace="a", gpu_count="fail"),
        finding("b", namespace="b", gpu_count="pass"),
        namespaces=("a", "b"),
    )

    assert counts(found) == {"pass": 1, "fail": 1, "warn": 0, "error": 0, "skip": 0}


def test_the_reports_built_are_of_the_api_the_kube_wing_publishes() -> None:
    assert (policy_report.GROUP, policy_report.VERSION, policy_report.PLURAL) == (
        publishing.GROUP,
        publishing.VERSION,
        publishing.PLURAL,
    )
    assert "=".join(policy_report.MANAGED_BY) == publishing.MANAGED_BY


def test_a_report_differing_only_in_timestamps_is_the_same_report() -> None:
    before = reports(finding("a", "denied", gpu_count="fail"))["ml"]
    later = policy_reports(
        [finding("a", "denied", gpu_count="fail")], ["ml"], timestamp=NOW + 3600,
        policy="policies/default.yaml",
    )["ml"]  # fmt: skip
    changed = reports(finding("a", gpu_count="pass"))["ml"]
    stored = {**before, "metadata": {**before["metadata"], "resourceVersion": "7", "uid": "u"}}

    assert publishing.same_report(stored, later)
    assert not publishing.same_report(stored, changed)


def naive_results(findings: list[Finding]) -> list[tuple[str, str, str]]:
    """Every result of every finding, sorted as the reports list them: broken first."""
    rank = {"fail": 1, "warn": 2, "audit": 2, "pass": 4}
    every = [
        (rank[outcome.outcome], found.subject.name, index, outcome.rule)
        for found in findings
        for index, outcome in enumerate(found.rules)
        if outcome.outcome != "skip"
    ]
    return [(name, rule, "") for _, name, _, rule in sorted(every)]


def test_results_folded_in_as_they_come_keep_only_the_first_by_rank_and_object() -> None:
    outcomes = ("pass", "fail", "warn", "audit", "skip")
    findings = [
        finding(
            f"p{(i * 7919) % 1000:04}",
            gpu_count=outcomes[i % 5],
            mig_profile=outcomes[(i // 5) % 5],
        )
        for i in range(1000)
    ]
    collected = policy_report.ReportResults(max_results=50)

    for found in findings:
        collected.add(found)

    kept = collected._namespaces["ml"]
    assert len(kept.heap) == 50  # never more held, whatever came
    [report] = collected.reports(["ml"], timestamp=NOW, policy="p").values()
    listed = [(r["resources"][0]["name"], r["rule"], "") for r in report["results"]]
    assert listed == naive_results(findings)[:50]
    assert report["metadata"]["annotations"][policy_report.OMITTED] == str(kept.total - 50)
    every = reports(*findings)["ml"]
    assert report["summary"] == every["summary"]
    assert [r["resources"][0]["name"] for r in every["results"][:50]] == [n for n, _, _ in listed]


def test_a_result_that_would_be_dropped_at_once_is_never_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    make = policy_report._result

    def counting(found: Finding, *args: Any) -> dict[str, Any]:
        built.append(found.subject.name)
        return make(found, *args)

    monkeypatch.setattr(policy_report, "_result", counting)
    collected = policy_report.ReportResults(max_results=2)
    for index in range(100):
        collected.add(finding(f"a{index:03}", gpu_count="pass"))

    assert built == ["a000", "a001"]


def test_every_string_a_result_copies_is_cut_however_long_the_tenant_wrote_it() -> None:
    """Sixty PyTorchJobs with a 1 MiB replica key made a 300 MiB report: now each result
    stays about a kilobyte."""
    key = "K" * (1024 * 1024)
    outcomes = (RuleOutcome("gpu-count", "fail", (f"container {key} asks too much",) * 3),)
    findings = [
        Finding(
            Subject("ml", "kubeflow.org/v1", "PyTorchJob", f"{key}{i}", "u" * 10_000, template=f"spec.pytorchReplicaSpecs.{key}.template"),
            "denied", f"denied: {key}", outcomes,
        )
        for i in range(60)
    ]  # fmt: skip

    report = reports(*findings)["ml"]

    assert len(report["results"]) == 60
    assert len(orjson.dumps(report)) < 60 * 2_000
    [resource] = report["results"][0]["resources"]
    assert resource["name"].endswith(f"({len(key) + 1:,} characters)")
    assert report["results"][0]["properties"]["template"].startswith("spec.pytorchReplicaSpecs.KKK")


def test_a_report_keeps_at_most_its_bytes_of_results_and_says_which_it_left_out() -> None:
    long = "m" * 2_000
    findings = [finding(f"p{i:04}", gpu_count="fail") for i in range(10)]
    findings = [
        Finding(f.subject, "denied", long, (RuleOutcome("gpu-count", "fail", (long,)), RuleOutcome("mig-profile", "pass")))
        for f in findings
    ]  # fmt: skip
    collected = policy_report.ReportResults(max_results=100, max_bytes=4_000)

    for found in findings:
        collected.add(found)
    [report] = collected.reports(["ml"], timestamp=NOW, policy="p").values()

    results = report["results"]
    assert 0 < len(results) < 10
    assert sum(len(orjson.dumps({k: v for k, v in r.items() if k != "timestamp"})) for r in results) <= 4_000  # fmt: skip
    assert {r["result"] for r in results} == {"fail"}  # failures first, passes dropped first
    annotations = report["metadata"]["annotations"]
    assert annotations[policy_report.OMITTED] == str(20 - len(results))
    assert annotations[policy_report.OMITTED_BY_RESULT] == f"fail={10 - len(results)},pass=10"
    assert report["summary"]["fail"] == 10 and report["summary"]["pass"] == 10


def test_the_default_bounds_keep_a_report_far_under_what_etcd_stores() -> None:
    assert policy_report.MAX_RESULTS_BYTES <= 1024 * 1024 // 2
