"""The matchConditions' Python twins (webhook/engine/handlers/twins.py); their agreement
with kube-apiserver's own CEL is tests/differential/test_match_conditions.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, pod, pod_create
from webhook.engine.handlers.twins import (
    claim_relevant,
    env_key_held,
    gpu_relevant,
    gpu_relevant_pod,
    judged_change,
    scheduling_changed,
    workload_relevant,
)
from webhook.policy import Policy, load_default_policy


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_default_policy()


def cpu_pod(**spec: Any) -> dict[str, Any]:
    obj = pod(containers=[container()])
    obj["metadata"].pop("labels", None)
    obj["spec"].update(spec)
    return obj


def test_a_cpu_pod_of_no_class_is_nothing_of_the_policys(policy: Policy) -> None:
    assert not gpu_relevant_pod(policy, pod_create(cpu_pod()))


@pytest.mark.parametrize("name", ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_IMEX_CHANNELS"])
def test_any_device_request_variable_makes_a_pod_the_policys(policy: Policy, name: str) -> None:
    obj = cpu_pod()
    obj["spec"]["containers"][0]["env"] = [{"name": name, "value": "all"}]

    assert gpu_relevant_pod(policy, pod_create(obj))


def test_an_envfrom_prefix_that_spells_a_device_request_makes_a_pod_the_policys(
    policy: Policy,
) -> None:
    obj = cpu_pod()
    source = {"configMapRef": {"name": "settings"}, "prefix": "NVIDIA_VISIBLE_"}
    obj["spec"]["containers"][0]["envFrom"] = [source]

    assert gpu_relevant_pod(policy, pod_create(obj))
    source["prefix"] = "APP_"
    assert not gpu_relevant_pod(policy, pod_create(obj))


def test_a_node_named_by_hand_counts_at_create_only(policy: Policy) -> None:
    obj = cpu_pod(nodeName="gpu-1")

    assert gpu_relevant_pod(policy, pod_create(obj))
    update = pod_create(obj, operation="UPDATE", subresource="ephemeralcontainers", old_object=obj)
    assert not gpu_relevant_pod(policy, update)


def test_a_toleration_of_every_taint_makes_a_pod_the_policys(policy: Policy) -> None:
    assert gpu_relevant_pod(policy, pod_create(cpu_pod(tolerations=[{"operator": "Exists"}])))


def test_a_label_makes_a_template_the_policys_but_not_a_pod_of_the_unclassed_webhooks(
    policy: Policy,
) -> None:
    labelled = pod("training", containers=[container()])

    assert gpu_relevant(policy, labelled)
    assert not gpu_relevant_pod(policy, pod_create(labelled))


def test_an_update_of_labels_leaves_scheduling_as_it_was(policy: Policy) -> None:
    old = cpu_pod(tolerations=[])
    relabelled = {**old, "metadata": {**old["metadata"], "labels": {"app": "b"}}}
    tolerating = cpu_pod(tolerations=[{"operator": "Exists"}])

    assert not scheduling_changed(
        policy, pod_create(relabelled, operation="UPDATE", old_object=old)
    )
    assert scheduling_changed(policy, pod_create(tolerating, operation="UPDATE", old_object=old))
    assert scheduling_changed(policy, pod_create(old))


@pytest.mark.parametrize(
    ("labels", "annotations"),
    [
        ({"gpu-admission.io/workload": "training"}, {}),  # another class
        ({}, {}),  # the class dropped
        ({"gpu-admission.io/workload": "inference", "gpu-admission.io/gpu-model": "A100"}, {}),
        ({"gpu-admission.io/workload": "inference"}, {"nvidia.cdi.k8s.io/pod": "x"}),
        ({"gpu-admission.io/workload": "inference"}, {"cdi.k8s.io/gpu": "nvidia.com/gpu=all"}),
    ],
)
def test_an_update_of_what_a_pod_was_admitted_as_is_a_change_judged(
    policy: Policy, labels: dict[str, str], annotations: dict[str, str]
) -> None:
    old = cpu_pod(tolerations=[])
    old["metadata"]["labels"] = {"gpu-admission.io/workload": "inference"}
    new = {**old, "metadata": {**old["metadata"], "labels": labels, "annotations": annotations}}

    assert judged_change(policy, pod_create(new, operation="UPDATE", old_object=old))


def test_other_labels_and_annotations_are_no_change_judged(policy: Policy) -> None:
    old = cpu_pod(tolerations=[])
    old["metadata"]["labels"] = {"gpu-admission.io/workload": "inference"}
    old["metadata"]["annotations"] = {"nvidia.cdi.k8s.io/pod": "x"}
    new = {
        **old,
        "metadata": {
            **old["metadata"],
            "labels": {"gpu-admission.io/workload": "inference", "app": "b"},
            "annotations": {"nvidia.cdi.k8s.io/pod": "x", "xcdi.k8s.io/a": "y"},
        },
    }

    assert not judged_change(policy, pod_create(new, operation="UPDATE", old_object=old))


def test_a_deployment_is_the_policys_by_its_template(policy: Policy) -> None:
    def deployment(template: dict[str, Any]) -> Any:
        obj = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": template}}
        return pod_create(obj, group="apps", kind="Deployment", resource="deployments")

    assert workload_relevant(policy, deployment(pod("training", containers=[container()])))
    assert not workload_relevant(policy, deployment(cpu_pod()))


def test_a_claim_is_the_policys_when_it_asks_for_one_of_its_device_classes(
    policy: Policy,
) -> None:
    def claim(device_class: str, *, first_available: bool = False) -> Any:
        ask: dict[str, Any] = {"name": "r", "exactly": {"deviceClassName": device_class}}
        if first_available:
            ask = {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": device_class}]}
        obj = {"spec": {"devices": {"requests": [ask]}}}
        return pod_create(obj, group="resource.k8s.io", resource="resourceclaims")

    assert claim_relevant(policy, claim("gpu.nvidia.com"))
    assert claim_relevant(policy, claim("mig.nvidia.com", first_available=True))
    assert not claim_relevant(policy, claim("fpga.example.com"))


def test_a_configmap_is_the_policys_when_a_key_is_named_as_a_device_request(
    policy: Policy,
) -> None:
    def configmap(**fields: Any) -> Any:
        return pod_create({"kind": "ConfigMap", **fields}, kind="ConfigMap", resource="configmaps")

    assert env_key_held(policy, configmap(data={"NVIDIA_VISIBLE_DEVICES": "all"}))
    assert env_key_held(policy, configmap(binaryData={"NVIDIA_IMEX_CHANNELS": "MA=="}))
    assert not env_key_held(policy, configmap(data={"config.yaml": "x"}))
