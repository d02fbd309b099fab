"""The clauses that keep a pod off a kind of node, by path and value
(webhook/engine/placement_exclusions.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import match_expression as expr
from tests.builders import pod
from webhook.engine.placement import selects
from webhook.engine.placement_exclusions import (
    REQUIRED_TERMS,
    Exclusion,
    exclusions,
    node_values,
    not_matching,
    tolerating,
)
from webhook.engine.pod import read_pod
from webhook.policy import load_default_policy
from webhook.policy.compiled import Taint

POLICY = load_default_policy()
KNOWN = frozenset({"gpu-pool", "nvidia-gpu-model"})
INFERENCE_A100 = {"gpu-pool": "inference", "nvidia-gpu-model": "A100"}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def viewed(*terms: dict[str, Any], node_selector: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {}
    if terms:
        spec["affinity"] = {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return read_pod(pod(**spec), POLICY)


def described(view: Any, labels: dict[str, str] = INFERENCE_A100) -> list[str]:
    return not_matching((e, [labels]) for e in exclusions(view, labels, KNOWN))


def test_a_node_selector_entry_is_named_with_its_value_and_the_label_it_misses() -> None:
    view = viewed(node_selector={"gpu-pool": "training", "zone": "a"})
    assert described(view) == [
        "spec.nodeSelector.gpu-pool: training does not match gpu-pool=inference"
    ]


def test_a_requirement_is_named_by_its_term_and_position() -> None:
    view = viewed(
        {"matchExpressions": [expr("rack", "Exists"), expr("nvidia-gpu-model", "In", "V100")]}
    )
    assert described(view) == [
        f"{REQUIRED_TERMS}[0].matchExpressions[1] (nvidia-gpu-model In [V100]) "
        "does not match nvidia-gpu-model=A100"
    ]


def test_each_of_several_failing_terms_is_named_and_an_empty_one_says_so() -> None:
    view = viewed(
        {"matchExpressions": [expr("gpu-pool", "DoesNotExist")]},
        {},
        {"matchExpressions": [expr("nvidia-gpu-model", "NotIn", "A100", "H100")]},
    )
    assert described(view) == [
        f"{REQUIRED_TERMS}[0].matchExpressions[0] (gpu-pool DoesNotExist) "
        "does not match gpu-pool=inference",
        f"{REQUIRED_TERMS}[1] (an empty term, which matches no node)",
        f"{REQUIRED_TERMS}[2].matchExpressions[0] (nvidia-gpu-model NotIn [A100, H100]) "
        "does not match nvidia-gpu-model=A100",
    ]


def test_terms_are_not_named_when_one_of_them_may_match() -> None:
    view = viewed(
        {"matchExpressions": [expr("gpu-pool", "In", "training")]},
        {"matchExpressions": [expr("rack", "In", "r1")]},
    )
    assert selects(view, INFERENCE_A100, KNOWN) is None
    assert exclusions(view, INFERENCE_A100, KNOWN) == []


def test_a_node_selector_and_the_terms_are_both_named_when_both_exclude() -> None:
    view = viewed(
        {"matchExpressions": [expr("gpu-pool", "In", "training")]},
        node_selector={"nvidia-gpu-model": "V100"},
    )
    assert [e.field for e in exclusions(view, INFERENCE_A100, KNOWN)] == [
        "spec.nodeSelector.nvidia-gpu-model",
        f"{REQUIRED_TERMS}[0].matchExpressions[0]",
    ]


@pytest.mark.parametrize(
    "view",
    [
        viewed(node_selector={"gpu-pool": "training"}),
        viewed({"matchExpressions": [expr("nvidia-gpu-model", "In", "V100")]}),
        viewed({}, {"matchExpressions": [expr("gpu-pool", "Exists"), expr("gpu-pool", "In", "x")]}),
    ],
    ids=["node-selector", "term", "terms"],
)
def test_a_node_the_pod_does_not_select_has_a_clause_that_excludes_it(view: Any) -> None:
    assert selects(view, INFERENCE_A100, KNOWN) is False
    assert exclusions(view, INFERENCE_A100, KNOWN)


def test_a_long_value_is_shortened_and_the_clauses_past_the_limit_are_counted() -> None:
    view = viewed(*({"matchExpressions": [expr("gpu-pool", "In", "x" * 5000)]} for _ in range(12)))
    clauses = described(view)
    assert len(clauses) == 4
    assert "(5,000 characters)" in clauses[0]
    assert len(clauses[0]) < 300
    assert clauses[-1] == "9 more clauses that do not match either"


def test_the_node_values_of_several_kinds_are_listed_once_each() -> None:
    labels = [{"gpu-pool": "training", "nvidia-gpu-model": "V100"}, {"gpu-pool": "training"}]
    assert node_values("gpu-pool", labels) == "gpu-pool=training"
    assert (
        node_values("nvidia-gpu-model", labels)
        == "nvidia-gpu-model=V100 or no label nvidia-gpu-model"
    )
    assert Exclusion("spec.nodeSelector.gpu-pool", "a", "gpu-pool").describe == (
        "spec.nodeSelector.gpu-pool: a"
    )


def test_the_tolerations_that_tolerate_blocking_taints_are_named_as_written() -> None:
    training = Taint("gpu-pool", "training", "NoSchedule")
    soft = Taint("gpu-pool", "inference", "PreferNoSchedule")
    tolerations = [
        {"key": "zone", "operator": "Exists"},
        {"key": "gpu-pool", "operator": "Equal", "value": "y" * 100},
        {"operator": "Exists", "tolerationSeconds": 5},
    ]
    assert tolerating(tolerations, [training, soft]) == [
        "spec.tolerations[2] {operator: Exists} tolerates gpu-pool=training:NoSchedule"
    ]
    assert tolerating(tolerations, [soft]) == []
