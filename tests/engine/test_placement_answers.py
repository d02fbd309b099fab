"""Placement answers kept by the fields they depend on (webhook/engine/placement_answers.py).

An engine judges a pod like one it judged before by looking its answer up; the answer
must be the one judging it afresh gives, whatever else the two pods share.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import jsonpatch

from tests.builders import container, pod, pod_create
from webhook.engine import Decision, Engine
from webhook.engine.inventory import UNKNOWN, Inventory, NodeFacts
from webhook.engine.placement_answers import PlacementAnswers
from webhook.policy import load_default_policy

POLICY = load_default_policy()
TOLERATE_EVERYTHING = [{"operator": "Exists"}]


def validated(engine: Engine, obj: dict[str, Any], inventory: Inventory = UNKNOWN) -> Decision:
    return engine.validate(pod_create(obj), inventory)


def afresh(obj: dict[str, Any], inventory: Inventory = UNKNOWN) -> Decision:
    return validated(Engine(POLICY), obj, inventory)


def mutated_inference_pod() -> dict[str, Any]:
    """An inference pod as our mutation leaves it (the placement every replica of it has)."""
    engine = Engine(POLICY)
    obj = pod("inference", containers=[container(gpus=1)])
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, list(engine.mutate(pod_create(obj)).patch))
    return patched


def test_a_pod_like_one_judged_before_gets_the_answer_judging_it_afresh_gives() -> None:
    engine = Engine(POLICY)
    first = mutated_inference_pod()
    second = copy.deepcopy(first)
    second["metadata"]["name"] = "another-replica"
    assert validated(engine, first).allowed
    assert validated(engine, second) == afresh(second)
    assert len(engine.answers.kept) == 1


def test_pods_alike_but_for_their_tolerations_are_judged_apart() -> None:
    engine = Engine(POLICY)
    own_pool = pod(
        "inference",
        containers=[container(gpus=1)],
        nodeSelector={"gpu-pool": "inference"},
        tolerations=[{"key": "gpu-pool", "value": "inference", "effect": "NoSchedule"}],
    )
    everywhere = copy.deepcopy(own_pool)
    everywhere["spec"]["nodeSelector"] = {}
    everywhere["spec"]["tolerations"] = TOLERATE_EVERYTHING
    untolerated = copy.deepcopy(everywhere)
    untolerated["spec"]["tolerations"] = []
    decisions = [validated(engine, obj) for obj in (own_pool, everywhere, untolerated)]
    assert decisions == [afresh(obj) for obj in (own_pool, everywhere, untolerated)]
    assert "could be scheduled on pool training" in decisions[1].message
    assert "can never be scheduled on its pool" in decisions[2].message
    assert "scheduled" not in decisions[0].message


def test_pods_alike_but_for_their_class_or_model_label_are_judged_apart() -> None:
    engine = Engine(POLICY)
    inference = mutated_inference_pod()
    training = copy.deepcopy(inference)
    training["metadata"]["labels"]["gpu-admission.io/workload"] = "training"
    modelled = copy.deepcopy(inference)
    modelled["metadata"]["labels"]["gpu-admission.io/gpu-model"] = "V100"
    for obj in (inference, training, modelled):
        assert validated(engine, obj) == afresh(obj)
    assert validated(engine, training) != validated(engine, inference)


def test_pods_whose_selectors_differ_only_in_order_keep_their_own_wording() -> None:
    engine = Engine(POLICY)
    one = pod("inference", containers=[container(gpus=1)], nodeSelector={"a": "1", "b": "2"})
    other = pod("inference", containers=[container(gpus=1)], nodeSelector={"b": "2", "a": "1"})
    for obj in (one, other, one):
        assert validated(engine, obj) == afresh(obj)


def test_an_inventory_change_starts_the_answers_over() -> None:
    engine = Engine(POLICY)
    no_class = pod(
        containers=[container()], tolerations=[{"key": "gpu-pool", "operator": "Exists"}]
    )
    untainted_gpu_node = NodeFacts(
        "gpu-7", {"nvidia.com/gpu.product": "NVIDIA-H100"}, True, {"nvidia.com/gpu": Decimal(8)}
    )
    before = Inventory(nodes=(), priority_classes={})
    after = Inventory(nodes=(untainted_gpu_node,), priority_classes={})
    assert validated(engine, no_class, before) == afresh(no_class, before)
    changed = validated(engine, no_class, after)
    assert changed == afresh(no_class, after)
    assert "gpu-7" in changed.message


def test_the_table_never_holds_more_than_its_bound() -> None:
    answers = PlacementAnswers(max_answers=3)
    engine = Engine(POLICY)
    engine.answers = answers
    for index in range(10):
        obj = pod("inference", containers=[container(gpus=1)], nodeSelector={"n": str(index)})
        assert validated(engine, obj) == afresh(obj)
        assert len(answers.kept) <= 3


def test_fields_over_the_key_bound_are_judged_each_time_and_never_kept() -> None:
    answers = PlacementAnswers(max_key_bytes=64)
    engine = Engine(POLICY)
    engine.answers = answers
    obj = pod("inference", containers=[container(gpus=1)], nodeSelector={"k": "v" * 100})
    assert validated(engine, obj) == afresh(obj)
    assert len(answers.kept) == 0


def test_fields_beyond_json_are_judged_each_time() -> None:
    engine = Engine(POLICY)
    obj = pod(
        "inference",
        containers=[container(gpus=1)],
        tolerations=[{"key": "x", "operator": "Exists", "extra": 2**70}],
    )
    assert validated(engine, obj) == afresh(obj)
    assert len(engine.answers.kept) == 0
