"""GPU shares (webhook/engine/gpu_shares.py, rule gpu-sharing): a pod written as the KAI
Scheduler's GPU-sharing documentation writes it (``gpu-fraction``, ``gpu-memory``), or
as Volcano's vGPU documentation does (``volcano.sh/vgpu-number``), with the class label
added, gets placement and priority and no whole GPU where a pool of its class shares
that way, and is refused naming the share where none does; without the label it is a
GPU pod of no class."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import admitted, container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.handlers.twins import gpu_relevant, judged_change
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text

WHOLE = Engine(load_default_policy())


def sharing(how: str) -> Engine:
    text = default_policy_text().replace("    # sharing: kaiFractions\n", f"    sharing: {how}\n")
    return Engine(load_policy_text(text, "sharing.yaml"))


KAI, VOLCANO = sharing("kaiFractions"), sharing("volcanoVgpu")


def kai_pod(label: str | None, **annotations: str) -> dict[str, Any]:
    shared = pod(label, containers=[container()])
    shared["metadata"]["annotations"] = annotations
    shared["spec"]["schedulerName"] = "kai-scheduler"
    return shared


def vgpu_pod(label: str | None) -> dict[str, Any]:
    resources = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "3000"}
    shared = pod(label, containers=[container(resources={"limits": resources})])
    shared["spec"]["schedulerName"] = "volcano"
    return shared


@pytest.mark.parametrize(
    "annotations", [{"gpu-fraction": "0.5"}, {"gpu-memory": "4000"}], ids=["fraction", "memory"]
)
def test_a_kai_share_of_a_class_gets_placement_and_priority_and_no_whole_gpu(
    annotations: dict[str, str],
) -> None:
    obj = kai_pod("inference", **annotations)

    mutated = jsonpatch.apply_patch(obj, list(KAI.mutate(pod_create(obj)).patch))

    assert "resources" not in mutated["spec"]["containers"][0]
    assert mutated["spec"]["priorityClassName"] == "inference-priority"
    assert mutated["spec"]["tolerations"] and mutated["spec"]["affinity"]
    assert admitted(KAI, obj).allowed


def test_a_kai_fraction_across_devices_gets_no_whole_gpu_either() -> None:
    obj = kai_pod("inference", **{"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"})

    assert admitted(KAI, obj).allowed
    assert "nvidia.com/gpu" not in str(KAI.mutate(pod_create(obj)).patch)


def test_a_volcano_vgpu_of_a_class_gets_no_whole_gpu_beside_it() -> None:
    obj = vgpu_pod("inference")

    mutated = jsonpatch.apply_patch(obj, list(VOLCANO.mutate(pod_create(obj)).patch))

    assert "nvidia.com/gpu" not in mutated["spec"]["containers"][0]["resources"]["limits"]
    assert admitted(VOLCANO, obj).allowed


@pytest.mark.parametrize(
    ("engine", "obj", "said"),
    [
        (WHOLE, kai_pod("inference", **{"gpu-fraction": "0.5"}), "gpu-fraction=0.5 (the KAI"),
        (VOLCANO, kai_pod("inference", **{"gpu-fraction": "0.5"}), "gpu-fraction=0.5 (the KAI"),
        (KAI, vgpu_pod("inference"), "volcano.sh/vgpu-number, volcano.sh/vgpu-memory (Volcano"),
        (KAI, kai_pod("training", **{"gpu-memory": "4000"}), "pool training shares none"),
    ],
    ids=["whole-gpus", "vgpu-pool", "kai-pool", "other-class"],
)
def test_a_share_no_pool_of_the_class_offers_is_refused_naming_it(
    engine: Engine, obj: dict[str, Any], said: str
) -> None:
    decision = admitted(engine, obj)

    assert not decision.allowed
    assert "gpu-sharing" in {v.rule for v in decision.violations}
    assert said in decision.message


@pytest.mark.parametrize(
    "obj", [kai_pod(None, **{"gpu-fraction": "0.5"}), vgpu_pod(None)], ids=["kai", "volcano"]
)
def test_a_share_without_a_class_is_a_gpu_pod_of_no_class(obj: dict[str, Any]) -> None:
    decision = KAI.validate(pod_create(obj))

    assert not decision.allowed
    assert "but has no label gpu-admission.io/workload" in decision.message


def test_the_webhooks_conditions_send_a_share_without_a_class() -> None:
    policy = load_default_policy()

    assert gpu_relevant(policy, kai_pod(None, **{"gpu-memory": "4000"}), labelled=False)
    assert gpu_relevant(policy, vgpu_pod(None), labelled=False)
    assert not gpu_relevant(policy, kai_pod(None, note="x"), labelled=False)


@pytest.mark.parametrize(
    ("before", "after"),
    [({}, {"gpu-fraction": "0.5"}), ({"gpu-fraction": "0.5"}, {"gpu-fraction": "1"})],
    ids=["added", "changed"],
)
def test_a_share_given_or_changed_by_an_update_is_refused(
    before: dict[str, str], after: dict[str, str]
) -> None:
    old = kai_pod(None, **before)
    new = kai_pod(None, **after)

    request = pod_create(new, operation="UPDATE", old_object=old, name="p")
    decision = KAI.validate(request)

    assert judged_change(KAI.policy, request)
    assert not decision.allowed
    assert "the update changes annotation 'gpu-fraction'" in decision.message
