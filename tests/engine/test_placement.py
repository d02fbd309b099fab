"""Kubernetes scheduling semantics in three values (webhook/engine/placement.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import match_expression as expr
from tests.builders import pod
from webhook.engine.placement import reach_of, selects, tolerates
from webhook.engine.pod import read_pod
from webhook.policy import load_default_policy
from webhook.policy.compiled import Taint

POLICY = load_default_policy()
KNOWN = frozenset({"gpu-pool", "nvidia-gpu-model"})
TRAINING_V100 = {"gpu-pool": "training", "nvidia-gpu-model": "V100"}
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def with_terms(*terms: dict[str, Any], node_selector: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {
        "affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": list(terms)}}}
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return read_pod(pod(**spec), POLICY)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (expr("gpu-pool", "In", "training"), True),
        (expr("gpu-pool", "In", "inference"), False),
        (expr("gpu-pool", "NotIn", "inference"), True),
        (expr("gpu-pool", "Exists"), True),
        (expr("gpu-pool", "DoesNotExist"), False),
        (expr("nvidia-gpu-model", "Gt", "5"), False),
        (expr("rack", "In", "r1"), None),
        (expr("rack", "DoesNotExist"), None),
    ],
)
def test_each_operator_is_judged_on_the_labels_the_policy_knows(
    expression: dict[str, Any], expected: bool | None
) -> None:
    view = with_terms({"matchExpressions": [expression]})
    assert selects(view, TRAINING_V100, KNOWN) is expected


def test_terms_are_ored() -> None:
    view = with_terms(
        {"matchExpressions": [expr("gpu-pool", "In", "inference")]},
        {"matchExpressions": [expr("gpu-pool", "In", "training")]},
    )
    assert selects(view, TRAINING_V100, KNOWN) is True


def test_a_false_requirement_decides_a_term_even_beside_an_unknown_one() -> None:
    view = with_terms({"matchExpressions": [expr("rack", "In", "r1"), expr("gpu-pool", "In", "x")]})
    assert selects(view, TRAINING_V100, KNOWN) is False


def test_an_empty_term_matches_no_node() -> None:
    assert selects(with_terms({}), TRAINING_V100, KNOWN) is False


def test_match_fields_name_nodes_the_policy_cannot_know() -> None:
    view = with_terms({"matchFields": [expr("metadata.name", "In", "n1")]})
    assert selects(view, TRAINING_V100, KNOWN) is None


def test_node_selector_and_affinity_must_both_hold() -> None:
    view = with_terms(
        {"matchExpressions": [expr("gpu-pool", "Exists")]}, node_selector={"gpu-pool": "inference"}
    )
    assert selects(view, TRAINING_V100, KNOWN) is False


def test_gt_and_lt_compare_integers() -> None:
    labels = {"gpu-pool": "7"}
    assert selects(with_terms({"matchExpressions": [expr("gpu-pool", "Gt", "6")]}), labels, KNOWN)
    assert not selects(
        with_terms({"matchExpressions": [expr("gpu-pool", "Lt", "6")]}), labels, KNOWN
    )


TAINT = Taint("gpu-pool", "training", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"operator": "Exists"}, True),
        ({"key": "gpu-pool", "operator": "Exists"}, True),
        ({"key": "gpu-pool", "value": "training"}, True),
        (
            {"key": "gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
            True,
        ),
        ({"key": "gpu-pool", "operator": "Equal", "value": "inference"}, False),
        ({"key": "gpu-pool", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Equal", "value": "training"}, False),
    ],
)
def test_tolerations_follow_kubernetes(toleration: dict[str, str], expected: bool) -> None:
    assert tolerates(toleration, TAINT) is expected


def test_reach_lists_every_pool_and_model_with_why_it_is_unreachable() -> None:
    policy = load_default_policy()
    reach = reach_of(
        policy, read_pod(pod(tolerations=[{"key": "gpu-pool", "value": "training"}]), policy)
    )
    summary = {(r.kind.pool, r.kind.model or r.kind.shape): r.reachable for r in reach}
    assert summary == {
        ("inference", "A100"): False,
        ("inference", "unlisted-model"): False,
        ("inference", "no-model"): False,
        ("training", "V100"): True,
        ("training", "A100"): True,
        ("training", "unlisted-model"): True,
        ("training", "no-model"): True,
        ("", "unknown-pool"): False,
    }
    assert [t.describe() for t in reach[0].untolerated] == ["gpu-pool=inference:NoSchedule"]
