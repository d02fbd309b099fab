from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.offline import extract_manifest_fields
from webhook.offline.manifest_fields import UnknownField, unknown_fields
from webhook.policy.compiled import TemplateKind
from webhook.policy.load import default_policy_text, load_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPOSITORY / "examples").rglob("*.yaml"))
CASES = sorted((REPOSITORY / "policies" / "tests").glob("*.yaml")) + sorted(
    (REPOSITORY / "webhook" / "policies" / "tests").glob("*.yaml")
)
POLICY_KINDS = load_policy_text(default_policy_text(), "default.yaml").workload_kinds
PYTORCH_JOB = TemplateKind(
    "kubeflow.org", "PyTorchJob", ("/spec/pytorchReplicaSpecs/*/template",), "pytorchjobs"
)


def typo_pod() -> dict[str, Any]:
    """The issue's pod: `resource:` where `resources:` is meant, asking 4 GPUs."""
    obj = builders.pod("training")
    obj["spec"]["containers"][0]["resource"] = {"limits": {"nvidia.com/gpu": "4"}}
    return obj


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": obj["metadata"]["labels"]}, "spec": obj["spec"]}


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text("utf-8")) if d]


def paths(found: list[UnknownField]) -> list[str]:
    return [f.path for f in found]


def test_a_misspelt_resources_is_found_with_its_path_and_the_field_meant() -> None:
    assert unknown_fields(typo_pod()) == [
        UnknownField("spec.containers[0].resource", "resource", "resources")
    ]


def test_the_finding_reads_as_kube_apiserver_would_name_it() -> None:
    [found] = unknown_fields(typo_pod())
    assert found.describe() == (
        'unknown field "spec.containers[0].resource" (did you mean "resources"?)'
    )


def test_a_typo_in_a_deployments_template_is_found_under_spec_template() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}}, "template": {}},
    }
    deployment["spec"]["template"] = template_of(typo_pod())
    assert paths(unknown_fields(deployment)) == ["spec.template.spec.containers[0].resource"]


def test_a_typo_in_a_cronjobs_template_is_found_under_its_job_template() -> None:
    case = REPOSITORY / "policies" / "tests" / "cronjob-gpu-without-class-denied.yaml"
    cron_job = yaml.safe_load(case.read_text("utf-8"))["object"]
    pod_spec = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    pod_spec["tolerations"] = [{"key": "gpu-pool", "operater": "Exists"}]
    assert unknown_fields(cron_job) == [
        UnknownField(
            "spec.jobTemplate.spec.template.spec.tolerations[0].operater", "operater", "operator"
        )
    ]


def test_the_path_to_a_template_is_checked_too() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "spec": {"backofLimit": 1, "template": {}}}
    assert unknown_fields(job) == [UnknownField("spec.backofLimit", "backofLimit", "backoffLimit")]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_no_example_manifest_has_an_unknown_field(path: Path) -> None:
    for obj in documents(path):
        assert unknown_fields(obj, POLICY_KINDS) == []


@pytest.mark.parametrize("path", CASES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_no_policy_test_case_object_nor_claim_has_an_unknown_field(path: Path) -> None:
    case = yaml.safe_load(path.read_text("utf-8"))
    for obj in [case["object"], *case.get("claims", [])]:
        assert unknown_fields(obj, POLICY_KINDS) == []


@pytest.mark.parametrize(
    "obj",
    [
        builders.pod("inference", containers=[builders.container(gpus=1, env=[])]),
        builders.claiming_pod(),
        builders.claim_template("one-gpu", builders.claim_spec(count=2, selectors=["true"])),
        builders.tenant_replica_set("r", 10),
    ],
    ids=["pod", "claiming pod", "claim template", "replica set"],
)
def test_no_object_the_test_builders_make_has_an_unknown_field(obj: dict[str, Any]) -> None:
    assert unknown_fields(obj) == []


def test_free_form_maps_are_not_descended() -> None:
    obj = builders.pod("training", containers=[builders.container(gpus=1)])
    obj["metadata"]["annotations"] = {"resource": "x", "sepc": "y"}
    obj["metadata"]["labels"]["resource"] = "x"
    obj["spec"]["nodeSelector"] = {"resource": "x"}
    obj["spec"]["containers"][0]["resources"]["limits"]["resource"] = "1"
    assert unknown_fields(obj) == []


def test_opaque_driver_parameters_of_a_claim_are_not_descended() -> None:
    template = builders.claim_template("one-gpu")
    template["spec"]["spec"]["devices"]["config"] = [
        {"opaque": {"driver": "gpu.nvidia.com", "parameters": {"anything": {"goes": 1}}}}
    ]
    assert unknown_fields(template) == []


def test_a_typo_in_a_claims_devices_is_found() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": builders.claim_spec(count=1),
    }
    claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = None
    claim["spec"]["devices"]["requests"][0]["exactly"]["cuont"] = 4
    assert unknown_fields(claim) == [
        UnknownField("spec.devices.requests[0].exactly.cuont", "cuont", "count")
    ]


def test_a_claim_is_judged_by_the_fields_of_its_own_version() -> None:
    v1beta1 = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "g"}]}}},
    }
    v1 = {**copy.deepcopy(v1beta1), "apiVersion": "resource.k8s.io/v1"}
    assert unknown_fields(v1beta1) == []
    assert paths(unknown_fields(v1)) == ["spec.spec.devices.requests[0].deviceClassName"]


def test_a_field_differing_only_in_case_is_unknown_and_its_spelling_suggested() -> None:
    obj = builders.pod("inference")
    obj["spec"]["nodeselector"] = {"gpu-pool": "inference"}
    assert unknown_fields(obj) == [
        UnknownField("spec.nodeselector", "nodeselector", "nodeSelector")
    ]


def test_a_key_like_no_field_has_no_suggestion() -> None:
    obj = builders.pod("inference")
    obj["spec"]["containers"][0]["zzz"] = 1
    assert unknown_fields(obj) == [UnknownField("spec.containers[0].zzz", "zzz", None)]


def test_every_unknown_field_is_found_in_document_order() -> None:
    obj = typo_pod()
    obj["sepc"] = {}
    obj["spec"]["initContainers"] = [{"name": "i", "image": "i", "evn": []}]
    obj["spec"]["affinity"] = {"nodeAffinity": {"required": {}}}
    assert paths(unknown_fields(obj)) == [
        "spec.containers[0].resource",
        "spec.initContainers[0].evn",
        "spec.affinity.nodeAffinity.required",
        "sepc",
    ]


def test_a_status_is_not_descended() -> None:
    obj = builders.pod("inference")
    obj["status"] = {"phase": "Running", "anything": {"else": 1}}
    assert unknown_fields(obj) == []


def test_values_of_the_wrong_shape_are_left_to_the_rules_that_refuse_them() -> None:
    obj = builders.pod("inference")
    obj["spec"]["containers"] = {"resource": 1}
    obj["spec"]["volumes"] = "none"
    assert unknown_fields(obj) == []


def test_a_kind_not_built_in_is_not_checked_unless_its_template_path_is_given() -> None:
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {}}}},
        "unknownToUs": True,
    }
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"] = template_of(typo_pod())
    assert unknown_fields(job) == []
    assert unknown_fields(job, [PYTORCH_JOB]) == [
        UnknownField(
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resource",
            "resource",
            "resources",
        )
    ]
    assert unknown_fields(job, POLICY_KINDS) == unknown_fields(job, [PYTORCH_JOB])


def test_a_kind_of_a_version_not_known_is_not_checked() -> None:
    deployment = {"apiVersion": "apps/v1beta1", "kind": "Deployment", "spec": {"sepc": 1}}
    assert unknown_fields(deployment) == []


def test_a_template_path_through_a_list_where_a_mapping_must_be_finds_nothing() -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": []}
    assert unknown_fields(job, [PYTORCH_JOB]) == []


def test_the_committed_schema_is_what_the_extractor_makes_of_kubernetes_openapi() -> None:
    source = extract_manifest_fields.openapi_dir()
    if not source.is_dir():
        pytest.skip(
            f"the OpenAPI of k8s.io/kubernetes {extract_manifest_fields.KUBERNETES_VERSION} "
            f"is not in the Go module cache ({source})"
        )
    expected = extract_manifest_fields.render(extract_manifest_fields.extract(source))
    assert extract_manifest_fields.OUTPUT.read_text("utf-8") == expected, (
        "webhook/offline/schemas/manifest-fields.json is out of date: "
        "run .venv/bin/python -m tests.offline.extract_manifest_fields"
    )
