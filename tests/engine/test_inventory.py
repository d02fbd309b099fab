"""Reading Node and PriorityClass objects into inventory facts (webhook/engine/inventory.py)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from webhook.engine.inventory import node_facts, priority_class_facts


def node_object(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-node-07", "labels": {"gpu-pool": "training"}},
        "spec": {},
        "status": status,
    }


def test_a_node_keeps_its_labels_and_allocatable_extended_resources_only() -> None:
    facts = node_facts(
        node_object(
            allocatable={
                "cpu": "254",
                "memory": "1040268Mi",
                "nvidia.com/gpu": "8",
                "nvidia.com/mig-1g.5gb": "14",
            }
        )
    )
    assert facts is not None
    assert facts.name == "gpu-node-07"
    assert facts.labels == {"gpu-pool": "training"}
    assert facts.schedulable
    assert facts.allocatable == {"nvidia.com/gpu": Decimal(8), "nvidia.com/mig-1g.5gb": Decimal(14)}


def test_a_cordoned_node_is_not_schedulable() -> None:
    obj = node_object(allocatable={"nvidia.com/gpu": "8"})
    obj["spec"]["unschedulable"] = True
    facts = node_facts(obj)
    assert facts is not None and not facts.schedulable


def test_resources_with_no_allocatable_amount_are_dropped() -> None:
    facts = node_facts(node_object(allocatable={"nvidia.com/gpu": "0", "example.com/fpga": "x"}))
    assert facts is not None and facts.allocatable == {}


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        {"metadata": {}},
        {"metadata": {"name": ""}},
        {"metadata": "node"},
    ],
)
def test_objects_without_a_name_are_not_nodes(obj: Any) -> None:
    assert node_facts(obj) is None


def test_odd_shapes_inside_a_node_are_skipped_not_raised() -> None:
    obj = {
        "metadata": {"name": "n", "labels": {"a": 1, "b": "ok"}},
        "spec": [],
        "status": {"allocatable": {"nvidia.com/gpu": True, "nvidia.com/mig-1g.5gb": ["7"]}},
    }
    facts = node_facts(obj)
    assert facts is not None
    assert facts.labels == {"b": "ok"} and facts.allocatable == {} and facts.schedulable


def test_a_priority_class_keeps_its_value_and_preemption_policy() -> None:
    facts = priority_class_facts(
        {
            "metadata": {"name": "inference-priority"},
            "value": 2000000,
            "preemptionPolicy": "Never",
        }
    )
    assert facts is not None
    assert (facts.name, facts.value, facts.preemption_policy) == (
        "inference-priority",
        2000000,
        "Never",
    )


@pytest.mark.parametrize(
    "obj",
    [{"metadata": {"name": "x"}}, {"metadata": {"name": "x"}, "value": True}, {"value": 1}],
)
def test_a_priority_class_without_a_name_or_an_integer_value_is_skipped(obj: Any) -> None:
    assert priority_class_facts(obj) is None


def test_only_the_labels_asked_for_are_kept_so_timestamps_do_not_churn() -> None:
    obj = node_object(allocatable={"nvidia.com/gpu": "8"})
    obj["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1764441600"
    facts = node_facts(obj, label_keys={"gpu-pool", "nvidia-gpu-model"})
    assert facts is not None and facts.labels == {"gpu-pool": "training"}
