"""Kueue's ResourceFlavors from the policy's pools, and a cluster's flavors held to the
policy (webhook/engine/kueue_flavors.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from webhook.engine.kueue_flavors import flavor_contradictions, pool_flavors
from webhook.policy import load_default_policy

POLICY = load_default_policy()


def flavor(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": spec,
    }


TRAINING_TAINT = {"key": "gpu-pool", "value": "training", "effect": "NoSchedule"}


def test_each_pool_gets_a_flavor_of_its_nodes_label_and_taints_and_no_tolerations() -> None:
    flavors = {f["metadata"]["name"]: f["spec"] for f in pool_flavors(POLICY)}

    assert flavors == {
        "inference": {
            "nodeLabels": {"gpu-pool": "inference"},
            "nodeTaints": [{"key": "gpu-pool", "value": "inference", "effect": "NoSchedule"}],
        },
        "training": {"nodeLabels": {"gpu-pool": "training"}, "nodeTaints": [TRAINING_TAINT]},
    }


@pytest.mark.parametrize("made", pool_flavors(POLICY), ids=lambda f: f["metadata"]["name"])
def test_the_flavors_made_from_the_policy_contradict_nothing(made: dict[str, Any]) -> None:
    assert flavor_contradictions(POLICY, made) == []


def test_a_flavor_of_no_gpu_pool_is_none_of_the_policys_business() -> None:
    cpu = flavor(nodeLabels={"cloud.example/spot": "true"}, tolerations=[{"key": "spot"}])

    assert flavor_contradictions(POLICY, cpu) == []


def test_a_flavor_of_a_pool_without_its_taint_is_found() -> None:
    (found,) = flavor_contradictions(POLICY, flavor(nodeLabels={"gpu-pool": "training"}))

    assert "nodeTaints lack the pool's taint gpu-pool=training:NoSchedule" in found


def test_flavor_tolerations_of_a_pools_taint_are_found() -> None:
    given = flavor(
        nodeLabels={"gpu-pool": "training"},
        nodeTaints=[TRAINING_TAINT],
        tolerations=[{"key": "gpu-pool", "operator": "Exists"}],
    )

    found = flavor_contradictions(POLICY, given)

    assert len(found) == 2  # both pools' taints are tolerated by an Exists on the key
    assert all("Kueue adds them to every workload" in sentence for sentence in found)


def test_a_pool_the_policy_does_not_name_is_found() -> None:
    (found,) = flavor_contradictions(POLICY, flavor(nodeLabels={"gpu-pool": "batch"}))

    assert "gpu-pool=batch, a pool the policy does not name" in found


def test_a_model_the_pool_does_not_have_is_found() -> None:
    labels = {"gpu-pool": "inference", "nvidia-gpu-model": "V100"}
    taints = [{"key": "gpu-pool", "value": "inference", "effect": "NoSchedule"}]

    (found,) = flavor_contradictions(POLICY, flavor(nodeLabels=labels, nodeTaints=taints))

    assert "nvidia-gpu-model=V100, a model pool inference does not have" in found


@pytest.mark.parametrize(
    "spec",
    [None, "x", {"nodeLabels": ["gpu-pool"]}, {"tolerations": "all"}, {"nodeTaints": [1]}],
    ids=["no-spec", "spec-a-string", "labels-a-list", "tolerations-a-string", "taint-a-number"],
)
def test_a_malformed_flavor_is_read_without_an_error(spec: Any) -> None:
    odd = copy.deepcopy(flavor())
    odd["spec"] = spec

    assert isinstance(flavor_contradictions(POLICY, odd), list)
