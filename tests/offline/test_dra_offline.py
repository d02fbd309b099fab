"""Pods claiming GPUs through Dynamic Resource Allocation, offline: their claims read from
the documents checked with them, the ResourceClaimTemplates and ResourceClaims judged
as at their CREATE, and both shown in every report (webhook/offline/evaluation.py,
text.py, report_data.py, prose.py, cases.py, junit.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import claim_spec, claim_template, claiming_pod, dra_engine
from webhook.engine import Engine
from webhook.offline.cases import run_case
from webhook.offline.documents import Document
from webhook.offline.evaluation import PodEvaluation, Report, evaluate
from webhook.offline.junit import report_junit
from webhook.offline.prose import explain, explain_claim_object
from webhook.offline.report_data import report_data
from webhook.offline.text import report_text

NOT_JUDGED = "gpu-admission: claims-not-judged: claim 'gpu' (ResourceClaimTemplate 'one-gpu') not read, so not judged"  # fmt: skip


@pytest.fixture(scope="module")
def engine() -> Engine:
    return dra_engine()


def deployment(template: dict[str, Any], namespace: str = "ml") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": namespace},
        "spec": {"template": {"metadata": template["metadata"], "spec": template["spec"]}},
    }


def checked(engine: Engine, *objects: tuple[str, dict[str, Any]]) -> Report:
    """The report of the objects, each with the file it comes from, checked together."""
    return evaluate(engine, [Document(source, 1, obj) for source, obj in objects])


def gpus_of(evaluation: PodEvaluation) -> list[str]:
    return [
        resource
        for c in evaluation.mutated["spec"]["containers"]
        for kind in ("limits", "requests")
        for resource in c.get("resources", {}).get(kind, {})
    ]


class TestClaimsFromTheDocuments:
    def test_a_deployment_claiming_a_gpu_through_a_template_in_another_file_is_judged(
        self, engine: Engine
    ) -> None:
        report = checked(
            engine,
            ("app/deployment.yaml", deployment(claiming_pod())),
            ("app/claims.yaml", claim_template("one-gpu")),
        )

        [pod] = report.pods
        [claim] = pod.claims
        assert report.allowed and pod.warnings == ()
        assert gpus_of(pod) == []
        assert claim.asks is not None and claim.asks.asks_gpus
        assert {r.rule: r.outcome for r in pod.rules}["resource-claims"] == "pass"

    def test_a_pod_using_a_template_of_nine_gpus_among_the_documents_is_refused(
        self, engine: Engine
    ) -> None:
        nine = claim_template("one-gpu", claim_spec(count=9))

        report = checked(engine, ("pod.yaml", claiming_pod("training")), ("claims.yaml", nine))

        [pod] = report.pods
        assert not pod.allowed and "pod claims 9 GPUs" in pod.message

    def test_a_pod_naming_a_template_not_among_the_documents_is_not_judged_with_a_warning(
        self, engine: Engine
    ) -> None:
        report = checked(engine, ("pod.yaml", claiming_pod()))

        [pod] = report.pods
        assert pod.allowed and pod.warnings == (NOT_JUDGED,)
        assert gpus_of(pod) == []

    def test_a_template_of_another_namespace_is_not_the_one_the_pod_names(
        self, engine: Engine
    ) -> None:
        elsewhere = claim_template("one-gpu")
        elsewhere["metadata"]["namespace"] = "other"

        report = checked(engine, ("pod.yaml", claiming_pod()), ("claims.yaml", elsewhere))

        assert report.pods[0].warnings == (NOT_JUDGED,)

    def test_a_template_without_a_namespace_is_the_one_the_pod_names(self, engine: Engine) -> None:
        anywhere = claim_template("one-gpu", claim_spec(count=9))
        del anywhere["metadata"]["namespace"]

        report = checked(engine, ("pod.yaml", claiming_pod("training")), ("claims.yaml", anywhere))

        assert "pod claims 9 GPUs" in report.pods[0].message

    def test_a_v1beta1_template_is_read_as_kube_apiserver_converts_it(self, engine: Engine) -> None:
        old = {
            "apiVersion": "resource.k8s.io/v1beta1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 9}]}}},
        }  # fmt: skip

        report = checked(engine, ("pod.yaml", claiming_pod("training")), ("claims.yaml", old))

        assert "pod claims 9 GPUs" in report.pods[0].message
        assert "claim at most 8 per pod" in report.claim_objects[0].message


OWN_GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpus.example.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
}  # fmt: skip
"""A GPU DeviceClass the policy does not name, picking the NVIDIA driver's GPUs."""


class TestDeviceClassesAmongTheDocuments:
    """A DeviceClass among the documents is read as the cluster's: a claim of one that
    picks the GPU driver's GPUs is a GPU claim for the mutation and the validation."""

    def test_a_claim_of_it_is_judged_as_gpus_and_gets_no_device_plugin_gpu(
        self, engine: Engine
    ) -> None:
        nine = claim_template("one-gpu", claim_spec("gpus.example.com", count=9))
        one = claim_template("one-gpu", claim_spec("gpus.example.com"))

        refused = checked(
            engine, ("classes.yaml", OWN_GPU_CLASS), ("pod.yaml", claiming_pod("training")),
            ("claims.yaml", nine),
        )  # fmt: skip
        admitted = checked(
            engine, ("classes.yaml", OWN_GPU_CLASS), ("pod.yaml", claiming_pod("training")),
            ("claims.yaml", one),
        )  # fmt: skip

        assert not refused.pods[0].allowed and "pod claims 9 GPUs" in refused.pods[0].message
        [pod] = admitted.pods
        assert pod.allowed and gpus_of(pod) == []
        assert "NVIDIA_VISIBLE_DEVICES" not in str(pod.mutated["spec"]["containers"])
        assert pod.claims[0].asks is not None and pod.claims[0].asks.asks_gpus
        [skipped] = admitted.skipped
        assert skipped.reason.startswith("a DeviceClass: read for which claims ask for GPUs")

    def test_a_template_of_it_is_judged_at_its_create(self, engine: Engine) -> None:
        nine = claim_template("nine", claim_spec("gpus.example.com", count=9))

        report = checked(engine, ("classes.yaml", OWN_GPU_CLASS), ("claims.yaml", nine))

        [claim] = report.claim_objects
        assert not claim.allowed and "pod claims 9 GPUs" in claim.message
        assert claim.asks is not None and claim.asks.asks_gpus


class TestClaimObjects:
    def test_a_template_for_nine_gpus_among_the_documents_is_refused(self, engine: Engine) -> None:
        report = checked(engine, ("claims.yaml", claim_template("nine", claim_spec(count=9))))

        [template] = report.claim_objects
        assert not report.allowed and report.claim_objects_denied == 1
        assert template.message.startswith(
            "gpu-admission denied ResourceClaimTemplate 'ml/nine': pod claims 9 GPUs"
        )
        assert template.failed_rules == ("gpu-count",)
        assert (report.pods, report.skipped) == ((), ())

    def test_a_template_a_node_can_satisfy_is_admitted(self, engine: Engine) -> None:
        report = checked(engine, ("claims.yaml", claim_template("one-gpu")))

        assert report.allowed and report.claim_objects[0].message == ""

    def test_a_malformed_template_is_refused_with_its_path_and_the_pods_naming_it_too(
        self, engine: Engine
    ) -> None:
        broken = claim_template("one-gpu", {"devices": {"requests": "all"}})

        report = checked(engine, ("pod.yaml", claiming_pod()), ("claims.yaml", broken))

        [template] = report.claim_objects
        assert not template.allowed and template.asks is None
        assert "spec.spec.devices.requests" in template.message
        assert "cannot be read" in report.pods[0].message

    def test_a_claim_object_of_a_version_not_read_is_skipped_with_why(self, engine: Engine) -> None:
        alpha = {**claim_template("one-gpu"), "apiVersion": "resource.k8s.io/v1alpha3"}

        report = checked(engine, ("claims.yaml", alpha))

        assert [s.reason for s in report.skipped] == [
            "resource.k8s.io/v1alpha3 ResourceClaimTemplate is not read: only v1, v1beta2, v1beta1"
        ]


@pytest.fixture
def report(engine: Engine) -> Report:
    """A Deployment using one template, a pod naming one not given, a refused template."""
    return checked(
        engine,
        ("app/deployment.yaml", deployment(claiming_pod())),
        ("app/pod.yaml", claiming_pod(gpu="elsewhere")),
        ("app/claims.yaml", claim_template("one-gpu")),
        ("app/claims.yaml", claim_template("nine", claim_spec(count=9))),
    )


class TestReports:
    def test_the_text_lists_each_pods_claims_and_each_claim_object_with_its_verdict(
        self, report: Report
    ) -> None:
        text = report_text(report)

        assert (
            "  claims (Dynamic Resource Allocation):\n"
            "    claim 'gpu' (ResourceClaimTemplate 'one-gpu'): 1 GPU of DeviceClass gpu.nvidia.com\n"
        ) in text
        assert (
            "    claim 'gpu' (ResourceClaimTemplate 'elsewhere'): not given, so not judged\n"
            in text
        )
        assert (
            "app/claims.yaml:1 ResourceClaimTemplate 'one-gpu': allowed\n"
            "  asks: 1 GPU of DeviceClass gpu.nvidia.com\n"
        ) in text
        assert (
            "app/claims.yaml:1 ResourceClaimTemplate 'nine': DENIED\n"
            "  asks: 9 GPUs of DeviceClass gpu.nvidia.com\n"
            "  gpu-admission denied ResourceClaimTemplate 'ml/nine': pod claims 9 GPUs"
        ) in text
        assert text.endswith(
            "1 pod and 1 pod template: 2 allowed, 0 denied; 2 ResourceClaimTemplates: 1 allowed, 1 denied; "
            "1 warning\n"
        )

    def test_the_data_has_each_pods_claims_and_each_claim_object(self, report: Report) -> None:
        data = report_data(report)

        assert data["allowed"] is False
        assert (data["summary"]["claimObjects"], data["summary"]["claimObjectsDenied"]) == (2, 1)
        assert data["pods"][0]["claims"] == [
            {
                "name": "gpu",
                "source": {"kind": "ResourceClaimTemplate", "name": "one-gpu"},
                "asks": ["1 GPU of DeviceClass gpu.nvidia.com"],
                "problem": None,
            }
        ]
        assert data["pods"][1]["claims"][0]["problem"] == "was not given"
        allowed, refused = data["claimObjects"]
        assert list(refused) == [
            "source", "line", "object", "verdict", "message", "warnings", "asks",
        ]  # fmt: skip
        assert (allowed["verdict"], refused["verdict"]) == ("allowed", "denied")
        assert refused["object"] == {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "namespace": "ml",
            "name": "nine",
        }
        assert refused["asks"] == ["9 GPUs of DeviceClass gpu.nvidia.com"]

    def test_the_data_is_plain_yaml(self, report: Report) -> None:
        data = report_data(report)

        assert yaml.safe_load(yaml.safe_dump(data)) == data

    def test_junit_fails_the_testcase_of_a_refused_template_in_its_files_testsuite(
        self, report: Report
    ) -> None:
        root = ET.fromstring(report_junit(report, ["app/deployment.yaml"]).encode("utf-8"))

        assert (root.get("tests"), root.get("failures")) == ("4", "1")
        [suite] = [s for s in root.findall("testsuite") if s.get("name") == "app/claims.yaml"]
        ok, refused = suite.findall("testcase")
        [failure] = refused.findall("failure")
        assert (ok.get("name"), ok.findall("failure")) == ("ResourceClaimTemplate 'one-gpu' (line 1)", [])  # fmt: skip
        assert refused.get("name") == "ResourceClaimTemplate 'nine' (line 1)"
        assert failure.get("type") == "denied"
        assert failure.get("message", "").startswith("gpu-admission denied ResourceClaimTemplate 'ml/nine'")  # fmt: skip

    def test_the_prose_lists_the_pods_claims(self, report: Report) -> None:
        text = explain(report.pods[0])

        assert (
            "\n\nIt has 1 claim of Dynamic Resource Allocation:\n"
            "  - claim 'gpu' (ResourceClaimTemplate 'one-gpu'): 1 GPU of DeviceClass gpu.nvidia.com\n\n"
        ) in text

    def test_the_prose_of_a_claim_object_says_what_it_asks_or_why_it_is_refused(
        self, report: Report
    ) -> None:
        allowed, refused = report.claim_objects

        assert explain_claim_object(allowed) == (
            "ResourceClaimTemplate 'one-gpu' would be admitted: it asks for 1 GPU of DeviceClass gpu.nvidia.com.\n"
        )
        assert explain_claim_object(refused).startswith(
            "ResourceClaimTemplate 'nine' would be denied: gpu-admission denied ResourceClaimTemplate 'ml/nine': pod claims 9 GPUs"
        )


def case_file(tmp_path: Path, case: dict[str, Any]) -> Path:
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case), "utf-8")
    return path


class TestCases:
    def test_a_case_judges_its_pods_claims_from_the_claims_it_gives(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        nine = claim_template("one-gpu", claim_spec(count=9))
        case = {"object": claiming_pod("training"), "claims": [nine], "expect": "denied", "rules": ["gpu-count"]}  # fmt: skip

        result = run_case(engine, case_file(tmp_path, case), "case.yaml")

        assert result.passed, result.problems

    def test_a_case_without_its_pods_claims_leaves_them_not_judged(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        case = {"object": claiming_pod("training"), "expect": "allowed", "rules": []}

        result = run_case(engine, case_file(tmp_path, case), "case.yaml")

        assert result.passed, result.problems

    def test_a_case_of_a_template_expects_its_verdict_and_the_rules_refusing_it(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        nine = claim_template("nine", claim_spec(count=9))
        case = {"object": nine, "expect": "allowed", "rules": []}

        result = run_case(engine, case_file(tmp_path, case), "case.yaml")

        assert result.problems[0].startswith(
            "expected allowed, got denied (gpu-admission denied ResourceClaimTemplate 'ml/nine'"
        )
        assert result.problems[1] == "expected rules to fail: none; failed: gpu-count"

    def test_a_case_whose_claims_are_not_claim_objects_is_broken(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        case = {"object": claiming_pod(), "claims": [claiming_pod()], "expect": "allowed"}

        result = run_case(engine, case_file(tmp_path, case), "case.yaml")

        assert result.broken
        assert result.problems == (
            "claims[0]: not a ResourceClaimTemplate or ResourceClaim of resource.k8s.io/v1, "
            "resource.k8s.io/v1beta2, resource.k8s.io/v1beta1",
        )
