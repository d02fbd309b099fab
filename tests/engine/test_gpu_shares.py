"""GPU shares asked by annotation (webhook/engine/gpu_shares.py): a pod written as the KAI
Scheduler's GPU-sharing documentation writes it (``gpu-fraction``, ``gpu-memory``),
with the class label added, gets placement and priority and no whole GPU; without the
label it is a GPU pod of no class."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import admitted, container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.handlers.twins import gpu_relevant
from webhook.policy import load_default_policy

ENGINE = Engine(load_default_policy())


def kai_pod(label: str | None, **annotations: str) -> dict[str, Any]:
    shared = pod(label, containers=[container()])
    shared["metadata"]["annotations"] = annotations
    shared["spec"]["schedulerName"] = "kai-scheduler"
    return shared


@pytest.mark.parametrize(
    "annotations", [{"gpu-fraction": "0.5"}, {"gpu-memory": "4000"}], ids=["fraction", "memory"]
)
def test_a_kai_share_of_a_class_gets_placement_and_priority_and_no_whole_gpu(
    annotations: dict[str, str],
) -> None:
    obj = kai_pod("inference", **annotations)

    decision = ENGINE.mutate(pod_create(obj))
    mutated = jsonpatch.apply_patch(obj, list(decision.patch))

    assert "resources" not in mutated["spec"]["containers"][0]
    assert mutated["spec"]["priorityClassName"] == "inference-priority"
    assert mutated["spec"]["tolerations"] and mutated["spec"]["affinity"]
    assert admitted(ENGINE, obj).allowed


def test_a_kai_fraction_across_devices_gets_no_whole_gpu_either() -> None:
    obj = kai_pod("training", **{"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"})

    assert admitted(ENGINE, obj).allowed
    assert "nvidia.com/gpu" not in str(ENGINE.mutate(pod_create(obj)).patch)


def test_a_kai_fraction_without_a_class_is_a_gpu_pod_of_no_class() -> None:
    decision = ENGINE.validate(pod_create(kai_pod(None, **{"gpu-fraction": "0.5"})))

    assert not decision.allowed
    assert "pod requests gpu-fraction=0.5 but has no label gpu-admission.io/workload" in (
        decision.message
    )


def test_the_webhooks_conditions_send_a_share_without_a_class() -> None:
    policy = load_default_policy()

    assert gpu_relevant(policy, kai_pod(None, **{"gpu-memory": "4000"}), labelled=False)
    assert not gpu_relevant(policy, kai_pod(None, note="x"), labelled=False)
