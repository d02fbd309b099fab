"""What a mutation injected, named from its patch (webhook/engine/mutation_summary.py)."""

from __future__ import annotations

from typing import Any

from tests.builders import container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.mutation_summary import injected, joined
from webhook.policy import load_default_policy


def patch_of(obj: dict[str, Any]) -> list[dict[str, Any]]:
    decision = Engine(load_default_policy()).mutate(pod_create(obj))
    assert decision.allowed, decision.message
    return list(decision.patch)


def test_a_class_pod_gets_affinity_tolerations_priority_and_gpu_limits() -> None:
    names = injected(patch_of(pod("inference")))

    assert names[:4] == ("affinity", "tolerations", "priority", "gpu-limits")


def test_a_container_without_gpus_is_named_as_isolated() -> None:
    obj = pod("inference", containers=[container(gpus=1), container(name="sidecar")])

    assert "gpu-isolation" in injected(patch_of(obj))


def test_paths_of_a_template_are_read_at_their_own_spec() -> None:
    patch = [
        {"op": "add", "path": "/spec/template/spec/tolerations", "value": []},
        {"op": "add", "path": "/spec/jobTemplate/spec/template/spec/priorityClassName", "value": "x"},
        {"op": "add", "path": "/spec/template/spec/affinity", "value": {"podAffinity": {}}},
        {"op": "add", "path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "1"},
    ]  # fmt: skip

    assert injected(patch) == ("co-location", "tolerations", "priority", "gpu-limits")


def test_a_whole_affinity_names_each_kind_it_holds_and_other_fields_their_own_name() -> None:
    patch = [
        {"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {}, "podAffinity": {}}},
        {"op": "add", "path": "/spec/schedulerName", "value": "x"},
        {"op": "remove", "path": "/spec/nodeSelector"},
    ]

    assert injected(patch) == ("affinity", "co-location", "schedulerName")


def test_no_patch_names_nothing() -> None:
    assert injected([]) == ()
    assert injected(patch_of(pod())) == ()


def test_what_a_template_recorded_is_joined_with_what_its_pod_gets() -> None:
    recorded = "affinity,tolerations,priority"
    assert joined(recorded, ("co-location",)) == (
        "affinity",
        "co-location",
        "tolerations",
        "priority",
    )


def test_only_the_names_of_a_mutation_are_kept_of_what_was_recorded() -> None:
    assert joined("affinity, anything-at-all,", ("schedulerName",)) == (
        "affinity",
        "schedulerName",
    )
    assert joined(None, ("priority",)) == ("priority",)
    assert joined(["affinity"], ("priority",)) == ("priority",)
