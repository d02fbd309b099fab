"""A `policy test` case names its pods' class and model (`workload`, `gpuModel`) and the
runner writes them as the policy's own pod labels (webhook/offline/case_labels.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from webhook.engine import Engine
from webhook.offline.case_labels import case_labels, labelled
from webhook.offline.cases import CaseResult, run_case_text, run_cases
from webhook.offline.documents import ManifestError
from webhook.policy.load import default_policy_text, load_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED_CASES = REPOSITORY / "policies" / "tests"
DEFAULT_KEYS = ("gpu-admission.io/workload", "gpu-admission.io/gpu-model")
RENAMED_KEYS = ("example.com/gpu-class", "example.com/gpu-model")

INFERENCE_POD = """\
description: an inference pod gets the inference priority
workload: inference
object:
  apiVersion: v1
  kind: Pod
  metadata:
    name: llm-server
    labels: {app: llm-server}
  spec:
    containers:
      - name: server
        image: registry.example/llm-server:1.4
        resources:
          limits: {nvidia.com/gpu: 1}
expect: allowed
rules: []
pods:
  - spec: {priorityClassName: inference-priority}
"""

PYTORCH_JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "bert"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}},
            "Worker": {
                "template": {
                    "metadata": {"labels": {"role": "worker"}},
                    "spec": {"containers": [{"name": "w", "image": "i"}]},
                }
            },
        }
    },
}


def renamed_policy_text() -> str:
    """The default policy with podLabels.workload and podLabels.gpuModel under other keys."""
    text = default_policy_text()
    for old, new in zip(DEFAULT_KEYS, RENAMED_KEYS, strict=True):
        field = "workload" if old.endswith("/workload") else "gpuModel"
        assert f"{field}: {old}" in text
        text = text.replace(f"{field}: {old}", f"{field}: {new}", 1)
    return text


@pytest.fixture(scope="module")
def renamed() -> Engine:
    engine = Engine(load_policy_text(renamed_policy_text(), "renamed.yaml"))
    assert (engine.policy.workload_label, engine.policy.gpu_model_label) == RENAMED_KEYS
    return engine


def run(engine: Engine, text: str) -> CaseResult:
    return run_case_text(engine, text, "case.yaml", "case.yaml")


def hard_coded(text: str, key: str = DEFAULT_KEYS[0]) -> str:
    """The case with its `workload` field written as a label of its pod, under `key`."""
    assert "workload: inference\n" in text
    return text.replace("workload: inference\n", "").replace(
        "labels: {app: llm-server}", f"labels: {{app: llm-server, {key}: inference}}"
    )


def test_every_shipped_case_passes_on_a_copy_of_the_policy_with_its_pod_labels_renamed(
    renamed: Engine,
) -> None:
    results = list(run_cases(renamed, SHIPPED_CASES))

    assert len(results) >= 9
    assert [(r.name, r.problems) for r in results if not r.passed] == []


def test_no_shipped_case_writes_the_default_policys_pod_label_keys() -> None:
    for path in sorted(SHIPPED_CASES.glob("*.yaml")):
        text = path.read_text("utf-8")
        assert not [key for key in DEFAULT_KEYS if key in text], path.name


def test_a_shipped_case_names_its_class_and_one_its_gpu_model() -> None:
    cases = [yaml.safe_load(p.read_text("utf-8")) for p in sorted(SHIPPED_CASES.glob("*.yaml"))]

    assert {case.get("workload") for case in cases} >= {"inference", "training"}
    assert any("gpuModel" in case for case in cases)


def test_a_label_hard_coded_under_the_old_key_is_judged_by_the_renamed_policys_key(
    engine: Engine, renamed: Engine
) -> None:
    # What the shipped cases did before they named their class: on the default policy
    # such a case still passes, on the renamed copy the label is no class label at all.
    text = hard_coded(INFERENCE_POD)

    assert run(engine, text).passed
    failed = run(renamed, text)
    assert not failed.broken
    assert failed.problems[0].startswith("expected allowed, got denied (")
    assert "has no label example.com/gpu-class" in failed.problems[0]
    assert "expected rules to fail: none; failed: workload-class" in failed.problems


def test_the_same_case_naming_its_class_passes_on_both_policies(
    engine: Engine, renamed: Engine
) -> None:
    assert run(engine, INFERENCE_POD).passed
    assert run(renamed, INFERENCE_POD).passed


def test_a_label_hard_coded_under_the_policys_own_key_still_works_without_the_field(
    renamed: Engine,
) -> None:
    assert run(renamed, hard_coded(INFERENCE_POD, RENAMED_KEYS[0])).passed


def test_the_label_is_written_into_every_pod_template_and_the_case_is_left_as_it_was(
    renamed: Engine,
) -> None:
    fields = case_labels(renamed.policy, "training", "V100")

    job = labelled(PYTORCH_JOB, fields, renamed.policy, renamed.kinds, "", "case.yaml")

    specs = job["spec"]["pytorchReplicaSpecs"]
    wanted = dict(zip(RENAMED_KEYS, ("training", "V100"), strict=True))
    assert specs["Master"]["template"]["metadata"]["labels"] == wanted
    assert specs["Worker"]["template"]["metadata"]["labels"] == {"role": "worker", **wanted}
    assert job["metadata"] == {"name": "bert"}
    assert "metadata" not in PYTORCH_JOB["spec"]["pytorchReplicaSpecs"]["Master"]["template"]


def refusal(engine: Engine, text: str) -> str:
    result = run(engine, text)
    assert result.broken
    [problem] = result.problems
    return problem


def test_a_class_the_policy_does_not_have_is_refused_at_its_line_with_the_classes(
    renamed: Engine,
) -> None:
    problem = refusal(renamed, INFERENCE_POD.replace("workload: inference", "workload: infrence"))

    assert problem == (
        "invalid case: case.yaml:2: workload: 'infrence' is not a class of the policy; "
        "did you mean 'inference'? (inference, training)"
    )


def test_a_gpu_model_no_pool_has_is_refused_with_the_models(engine: Engine) -> None:
    text = INFERENCE_POD.replace("workload: inference\n", "workload: inference\ngpuModel: B200\n")

    assert refusal(engine, text) == (
        "invalid case: case.yaml:3: gpuModel: 'B200' is not a GPU model of the policy's "
        "pools (A100, V100)"
    )


def test_a_gpu_model_in_the_wrong_case_is_told_the_model_it_means(engine: Engine) -> None:
    text = INFERENCE_POD.replace("workload: inference\n", "workload: inference\ngpuModel: a100\n")

    assert refusal(engine, text) == (
        "invalid case: case.yaml:3: gpuModel: 'a100' is not a GPU model of the policy's "
        "pools; did you mean 'A100'? (A100, V100)"
    )


def test_a_class_given_both_as_the_field_and_as_the_label_is_refused(renamed: Engine) -> None:
    text = INFERENCE_POD.replace(
        "labels: {app: llm-server}", "labels: {app: llm-server, example.com/gpu-class: training}"
    )

    assert refusal(renamed, text) == (
        "invalid case: case.yaml:2: workload: the object already sets the label "
        "example.com/gpu-class (metadata.labels); name the workload once: keep "
        "`workload: inference` and drop the label"
    )


def test_labels_that_are_not_a_mapping_are_refused(engine: Engine) -> None:
    text = INFERENCE_POD.replace("labels: {app: llm-server}", "labels: [app]")

    assert refusal(engine, text) == "invalid case: case.yaml:2: metadata.labels: not a mapping"


def test_a_claim_object_has_no_pods_to_label(engine: Engine) -> None:
    text = """\
object:
  apiVersion: resource.k8s.io/v1
  kind: ResourceClaimTemplate
  metadata: {name: one-gpu}
  spec: {spec: {devices: {requests: []}}}
workload: inference
expect: allowed
"""

    assert refusal(engine, text) == (
        "invalid case: case.yaml:6: workload: a ResourceClaimTemplate has no pods to label; "
        "workload is for a Pod or an object with pod templates"
    )


def test_a_workload_that_is_not_text_is_refused(engine: Engine) -> None:
    problem = refusal(engine, INFERENCE_POD.replace("workload: inference", "workload: [a, b]"))

    assert problem == "invalid case: case.yaml:2: workload: [a, b] is not text"


def test_fields_left_out_write_nothing(engine: Engine) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}

    assert case_labels(engine.policy, None, None) == []
    assert labelled(pod, [], engine.policy, engine.kinds, "", "c") == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {},
    }


def test_a_class_that_is_not_the_policys_is_refused_and_the_object_left_unlabelled(
    engine: Engine,
) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    fields = case_labels(engine.policy, "gpu", None)

    with pytest.raises(ManifestError, match="'gpu' is not a class of the policy"):
        labelled(pod, fields, engine.policy, engine.kinds, "", "c")
    assert pod == {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}


def test_templates_that_are_one_yaml_alias_are_labelled_once_not_refused(engine: Engine) -> None:
    text = """\
description: a job whose worker template is its master's, by a YAML alias
workload: training
object:
  apiVersion: kubeflow.org/v1
  kind: PyTorchJob
  metadata: {name: bert}
  spec:
    pytorchReplicaSpecs:
      Master:
        replicas: 1
        template: &pod
          spec:
            containers:
              - name: trainer
                image: registry.example/bert:1
                resources: {limits: {nvidia.com/gpu: 8}}
      Worker:
        replicas: 1
        template: *pod
expect: allowed
"""

    result = run(engine, text)

    assert (result.broken, result.problems) == (False, ())


def test_a_class_too_long_to_read_is_shown_cut(engine: Engine) -> None:
    problem = refusal(
        engine, INFERENCE_POD.replace("workload: inference", "workload: " + "x" * 5000)
    )

    assert problem.startswith("invalid case: case.yaml:2: workload: 'xxx")
    assert len(problem) < 400, problem
