"""The report of `gpu-admission audit`, for people and as data (webhook.offline.audit_report)."""

from __future__ import annotations

import json

from webhook.engine import RuleOutcome
from webhook.offline.audit import AuditSummary, Finding, Subject, subject_of
from webhook.offline.audit_report import AuditOutcome, AuditScope, audit_data, audit_text

PASSED = (RuleOutcome("visible-devices", "pass"), RuleOutcome("gpu-count", "pass"))
DENIED = (RuleOutcome("visible-devices", "fail", ("sets NVIDIA_VISIBLE_DEVICES",)), RuleOutcome("gpu-count", "pass"))  # fmt: skip
WARNED = (RuleOutcome("visible-devices", "pass"), RuleOutcome("gpu-count", "warn", ("9 GPUs",)))


def outcome(*findings: Finding, namespaces: tuple[str, ...] = ("a", "b")) -> AuditOutcome:
    summary = AuditSummary()
    for namespace in namespaces:
        summary.include_namespace(namespace)
    for found in findings:
        summary.add(found)
    return AuditOutcome("policies/default.yaml (embedded)", AuditScope(False, namespaces), summary, findings)  # fmt: skip


FINDINGS = (
    Finding(Subject("a", "v1", "Pod", "ok"), "passed", "", PASSED),
    Finding(Subject("a", "v1", "Pod", "peek"), "denied", "gpu-admission denied pod 'a/peek': sets it", DENIED),
    Finding(Subject("b", "apps/v1", "Deployment", "big", template="spec.template"), "warned", "", WARNED),
)  # fmt: skip


def test_the_text_counts_by_rule_and_by_namespace_then_lists_what_is_not_clean() -> None:
    text = audit_text(outcome(*FINDINGS))

    assert text.splitlines()[0] == (
        "gpu-admission audit of 2 Pods, 1 Deployment in 2 opted-in namespaces "
        "(3 pods and pod templates judged; policy policies/default.yaml (embedded))"
    )
    assert "Judged: each pod as the webhooks would judge its CREATE today" in text
    assert "\nRULE             PASS  FAIL  WARN  AUDIT  SKIP\n" in text
    assert "\nvisible-devices     2     1     0      0     0\n" in text
    assert "\ngpu-count           2     0     1      0     0\n" in text
    assert "\na               2       1       0        0         0       1\n" in text
    assert "\nDENIED (1):\n  Pod 'a/peek': gpu-admission denied pod 'a/peek': sets it\n" in text
    assert (
        "\nWARNED (1):\n  Deployment 'b/big' template (spec.template): gpu-count: 9 GPUs\n" in text
    )
    assert text.endswith(
        "1 of 3 would be denied (1 denied, 1 warned, 0 audited, 0 exempted, 1 passed)\n"
    )


def test_only_denied_lists_the_denied_alone_under_the_same_counts() -> None:
    text = audit_text(outcome(*FINDINGS), only_denied=True)

    assert "DENIED (1)" in text
    assert "WARNED (" not in text
    assert "\ngpu-count           2     0     1      0     0\n" in text


def test_the_data_is_an_audit_report_with_summary_and_results() -> None:
    data = audit_data(outcome(*FINDINGS))

    assert (data["apiVersion"], data["kind"]) == ("gpu-admission.io/v1alpha1", "AuditReport")
    assert data["scope"] == {"allNamespaces": False, "namespaces": ["a", "b"]}
    assert data["summary"]["judged"] == 3
    assert data["summary"]["objects"] == {"Deployment": 1, "Pod": 2}
    assert data["summary"]["verdicts"] == {"denied": 1, "warned": 1, "audited": 0, "exempted": 0, "passed": 1}  # fmt: skip
    assert data["summary"]["rules"]["gpu-count"] == {"pass": 2, "fail": 0, "warn": 1, "audit": 0, "skip": 0}  # fmt: skip
    assert data["summary"]["namespaces"]["b"] == {"judged": 1, "denied": 0, "warned": 1, "audited": 0, "exempted": 0, "passed": 0}  # fmt: skip
    assert data["results"][2] == {
        "namespace": "b", "apiVersion": "apps/v1", "kind": "Deployment", "name": "big",
        "template": "spec.template", "verdict": "warned", "message": "", "exemption": "",
        "rules": [
            {"rule": "visible-devices", "outcome": "pass", "messages": []},
            {"rule": "gpu-count", "outcome": "warn", "messages": ["9 GPUs"]},
        ],
    }  # fmt: skip


def test_nothing_to_audit_says_so() -> None:
    text = audit_text(outcome(namespaces=()))

    assert text.startswith("gpu-admission audit of nothing in 0 opted-in namespaces")
    assert text.endswith("0 of 0 would be denied (0 denied, 0 warned, 0 audited, 0 exempted, 0 passed)\n")  # fmt: skip


def test_no_string_of_a_result_grows_with_what_the_tenant_wrote() -> None:
    key = "K" * (1024 * 1024)
    huge = Finding(
        subject_of({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"namespace": "a", "name": key}}),
        "denied", f"gpu-admission denied {key}", (RuleOutcome("gpu-count", "fail", (key,)),), exemption=key,
    )  # fmt: skip

    data = audit_data(outcome(huge))
    text = audit_text(outcome(huge))

    assert len(json.dumps(data)) < 10_000
    assert len(text) < 10_000
    [result] = data["results"]
    assert result["message"].endswith("characters)") and result["name"].endswith("characters)")


def test_a_narrowed_audit_names_its_namespaces_and_says_why_the_others_named_were_not_audited() -> (
    None
):
    summary = AuditSummary()
    summary.include_namespace("a")
    scope = AuditScope(False, ("a",), named=("a", "b"), not_audited={"b": "no such namespace"})
    narrowed = AuditOutcome("policies/default.yaml (embedded)", scope, summary, ())

    text = audit_text(narrowed)
    data = audit_data(narrowed)

    assert text.startswith("gpu-admission audit of nothing in 1 namespace named ")
    assert "\nnot audited: namespace 'b': no such namespace\n" in text
    assert data["scope"] == {
        "allNamespaces": False,
        "namespaces": ["a"],
        "named": ["a", "b"],
        "notAudited": {"b": "no such namespace"},
    }
    assert "named" not in audit_data(outcome())["scope"]


FLAVORS = {"training-notaint": ("it selects pool training but its nodeTaints lack the taint",)}


def test_kueue_flavors_the_policy_contradicts_are_listed_by_name_with_why() -> None:
    found = outcome(*FINDINGS)
    with_flavors = AuditOutcome(
        found.policy, found.scope, found.summary, found.findings, {}, FLAVORS
    )

    text = audit_text(with_flavors)

    assert (
        "\nKUEUE FLAVORS THE POLICY CONTRADICTS (1):\n  ResourceFlavor 'training-notaint': "
        "it selects pool training but its nodeTaints lack the taint\n"
    ) in text
    assert audit_data(with_flavors)["kueueFlavors"] == [
        {"name": "training-notaint", "contradictions": list(FLAVORS["training-notaint"])}
    ]
    assert "KUEUE FLAVORS" not in audit_text(found)
    assert audit_data(found)["kueueFlavors"] == []


def test_namespaces_below_pod_security_baseline_are_listed_with_why() -> None:
    found = outcome(*FINDINGS)
    below = {"ml": "no pod-security.kubernetes.io/enforce label: the cluster's default"}
    with_below = AuditOutcome(
        found.policy, found.scope, found.summary, found.findings, below_baseline=below
    )

    text = audit_text(with_below)

    assert "\nNAMESPACES BELOW POD SECURITY BASELINE (1): " in text
    assert "\n  ml: no pod-security.kubernetes.io/enforce label" in text
    assert audit_data(with_below)["belowPodSecurityBaseline"] == [
        {"namespace": "ml", "reason": below["ml"]}
    ]
    assert "POD SECURITY" not in audit_text(found)
    assert audit_data(found)["belowPodSecurityBaseline"] == []
