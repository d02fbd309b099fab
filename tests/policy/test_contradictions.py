"""Policies whose fields are each valid but together hold no cluster
(webhook/policy/contradictions.py), each refused at its line with what would be accepted."""

from __future__ import annotations

import pytest
import yaml

from tests.policy.edits import edited, line_of
from webhook.errors import PolicyError, PolicyProblem
from webhook.policy import load_policy_text
from webhook.policy.contradictions import contradiction_problems, most_gpus_per_node
from webhook.policy.load import default_policy_text

SOURCE = "edited.yaml"


def the_problem_of(text: str) -> PolicyProblem:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(text, SOURCE)
    [problem] = raised.value.problems
    return problem


INFERENCE_DEFAULT = "value: 1000000}\n    defaultGpus: 1"


def test_a_class_defaulting_to_more_gpus_than_a_node_of_its_pools_has_is_refused() -> None:
    text = edited((INFERENCE_DEFAULT, "value: 1000000}\n    defaultGpus: 16"))

    problem = the_problem_of(text)

    assert (problem.path, problem.line) == (
        "classes.inference.defaultGpus",
        line_of(text, "defaultGpus: 16"),
    )
    assert problem.reason == (
        "16 GPUs per pod, but a node of the class's pools has at most 8 (pool 'inference'): "
        "every pod given this default would be refused; write at most 8"
    )


def test_a_default_that_fits_the_largest_node_of_any_of_the_class_pools_is_accepted() -> None:
    text = edited(
        ("pools: [inference]", "pools: [inference, training]"),
        (INFERENCE_DEFAULT, "value: 1000000}\n    defaultGpus: 16"),
        ("      V100: {product: V100-SXM2-32GB}", "      V100: {product: V100-SXM2-32GB, gpusPerNode: 16}"),
    )  # fmt: skip

    assert load_policy_text(text, SOURCE).classes["inference"].default_gpus == 16


def test_a_default_is_compared_with_the_pools_taking_the_device_plugins_gpus_only() -> None:
    pools = {
        "plugin": {"gpusPerNode": 8, "models": {}},
        "claims": {"gpusPerNode": 16, "models": {}, "gpusThrough": "dra"},
    }
    classes = {
        "mixed": {"pools": ["plugin", "claims"], "defaultGpus": 16},
        "dra-only": {"pools": ["claims"], "defaultGpus": 32},
    }

    [(path, reason)] = contradiction_problems({"pools": pools, "classes": classes})

    assert path == ("classes", "mixed", "defaultGpus")
    assert "has at most 8 (pool 'plugin')" in reason


def test_the_most_gpus_of_a_pool_are_its_own_count_or_a_models_if_larger() -> None:
    assert most_gpus_per_node({"gpusPerNode": 8, "models": {"A": {"gpusPerNode": 16}}}) == 16
    assert most_gpus_per_node({"gpusPerNode": 8, "models": {"A": {"gpusPerNode": 4}}}) == 8
    assert most_gpus_per_node({"gpusPerNode": "8", "models": {}}) is None
    assert most_gpus_per_node({"gpusPerNode": -8, "models": {}}) is None


def test_a_default_is_not_compared_with_pools_that_are_unknown_or_malformed() -> None:
    data = {
        "pools": {"a": {"gpusPerNode": 8.0, "models": {}}},
        "classes": {
            "x": {"pools": ["a"], "defaultGpus": 16},
            "y": {"pools": ["missing"], "defaultGpus": 16},
        },
    }

    assert contradiction_problems(data) == []


def test_two_classes_giving_one_priority_class_different_values_are_refused() -> None:
    text = edited(
        ("{name: training-priority, value: 1000}", "{name: inference-priority, value: 1000}")
    )

    problem = the_problem_of(text)

    assert (problem.path, problem.line) == (
        "classes.training.priorityClass.value",
        line_of(text, "{name: inference-priority, value: 1000}"),
    )
    assert problem.reason == (
        "PriorityClass 'inference-priority' has one value: class 'inference' gives it "
        "1000000, this class 1000; give both 1000000 or name another class"
    )


def test_two_classes_sharing_one_priority_class_with_the_same_value_are_accepted() -> None:
    text = edited(
        ("{name: training-priority, value: 1000}", "{name: inference-priority, value: 1000000}")
    )

    policy = load_policy_text(text, SOURCE)

    assert policy.governed_priority_classes == {"inference-priority"}


def test_two_classes_giving_one_priority_class_different_preemption_policies_are_refused() -> None:
    text = edited(
        (
            "{name: training-priority, value: 1000}",
            "{name: inference-priority, value: 1000000, preemptionPolicy: Never}",
        )
    )

    problem = the_problem_of(text)

    assert problem.path == "classes.training.priorityClass.preemptionPolicy"
    assert "class 'inference' gives it PreemptLowerPriority, this class Never" in problem.reason


def test_a_priority_class_named_like_kubernetes_own_is_refused() -> None:
    text = edited(("name: training-priority", "name: system-training"))

    problem = the_problem_of(text)

    assert (problem.path, problem.line) == (
        "classes.training.priorityClass.name",
        line_of(text, "system-training"),
    )
    assert "kept for Kubernetes' own classes; choose another name" in problem.reason


@pytest.mark.parametrize(
    ("replacement", "path", "reason"),
    [
        (
            ("gpuModel: gpu-admission.io/gpu-model", "gpuModel: gpu-admission.io/workload"),
            "podLabels.gpuModel",
            "podLabels.workload is 'gpu-admission.io/workload' too; one label cannot name "
            "both the workload and the gpuModel: give each its own key",
        ),
        (
            ("model: nvidia-gpu-model", "model: gpu-pool"),
            "nodeLabels.model",
            "nodeLabels.pool is 'gpu-pool' too; one label cannot name both the pool and "
            "the model: give each its own key",
        ),
    ],
    ids=["pod", "node"],
)
def test_one_label_key_read_for_two_meanings_is_refused(
    replacement: tuple[str, str], path: str, reason: str
) -> None:
    text = edited(replacement)

    problem = the_problem_of(text)

    assert (problem.path, problem.line, problem.reason) == (
        path,
        line_of(text, replacement[1]),
        reason,
    )


def test_a_label_key_left_at_its_default_is_compared_with_the_one_given() -> None:
    data = {"podLabels": {"gpuModel": "gpu-admission.io/workload"}}

    [(path, _)] = contradiction_problems(data)

    assert path == ("podLabels", "gpuModel")


def test_two_taints_of_a_pool_with_one_key_and_effect_are_refused() -> None:
    taints = (
        "    taints:\n"
        "      - {key: gpu-pool, value: training}\n"
        "      - {key: gpu-pool, value: other, effect: NoSchedule}\n"
        "      - {key: gpu-pool, value: other, effect: NoExecute}\n"
    )
    text = edited(("    models:\n      V100", f"{taints}    models:\n      V100"))

    problem = the_problem_of(text)

    assert (problem.path, problem.line) == (
        "pools.training.taints[1]",
        line_of(text, "value: other, effect: NoSchedule"),
    )
    assert problem.reason == (
        "a node has one taint of key 'gpu-pool' and effect NoSchedule; "
        "Kubernetes refuses a second: keep one"
    )


def test_the_shipped_policy_holds_no_contradiction() -> None:
    assert contradiction_problems(yaml.safe_load(default_policy_text())) == []
