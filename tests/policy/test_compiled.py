"""Lookups on the compiled policy (webhook/policy/compiled.py): which pools, models and node
sizes a class pod can use, given the GPU model it may be pinned to."""

from __future__ import annotations

import pytest

from webhook.policy import Policy, load_policy_text
from webhook.policy.load import default_policy_text

# Training nodes: 8 V100 or 4 A100; inference nodes: 8 A100. Inference pods may use both pools.
POLICY_TEXT = (
    default_policy_text()
    .replace("A100: {product: A100-SXM4-80GB}", "A100: {product: A100-SXM4-80GB, gpusPerNode: 4}")
    .replace("pools: [inference]", "pools: [inference, training]", 1)
)


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy_text(POLICY_TEXT, "test")


def test_a_pod_pinned_to_a_model_can_use_the_pools_that_have_it(policy: Policy) -> None:
    inference = policy.classes["inference"]

    assert [p.name for p in policy.pools_for(inference, "A100")] == ["inference", "training"]
    assert [p.name for p in policy.pools_for(inference, "V100")] == ["training"]
    assert [p.name for p in policy.pools_for(inference, None)] == ["inference", "training"]


def test_a_model_label_pins_only_to_a_model_of_the_class(policy: Policy) -> None:
    training = policy.classes["training"]

    assert training.pinned_model("V100") == "V100"
    assert training.pinned_model("H100") is None
    assert training.pinned_model(None) is None


def test_a_pools_models_and_node_size_narrow_to_the_model_it_has(policy: Policy) -> None:
    training = policy.pools["training"]

    assert [m.name for m in training.models_for("A100")] == ["A100"]
    assert [m.name for m in training.models_for("H100")] == ["V100", "A100"]
    assert [m.name for m in training.models_for(None)] == ["V100", "A100"]
    assert (training.gpus_per_node_of("A100"), training.gpus_per_node_of(None)) == (4, 8)
    assert training.gpus_per_node_of("H100") == 8


def test_the_rules_enforcement_names_are_kept_with_where_they_are_named() -> None:
    policy = load_policy_text(
        default_policy_text()
        + "\nenforcement:\n  rules: {gpu-count: warn}\n"
        + "  classes:\n    training:\n      rules: {priority-class: audit}\n",
        "test",
    )

    assert policy.named_rules == (
        ("enforcement.rules.gpu-count", "gpu-count"),
        ("enforcement.classes.training.rules.priority-class", "priority-class"),
    )
