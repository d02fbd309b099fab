"""Kueue in front of the scheduler, with gpu-admission's webhooks (docs/kueue.md).

Kueue's own manager (``tests/e2e/kueue.py``) charges quota, orders and places each
workload from its pod templates before any pod exists. The flavors are those
``gpu-admission manifests kueue-flavors`` prints for the default policy: each pool's
label and taints, no tolerations, so that only workloads whose templates tolerate a
pool are assigned it. Each test runs in a namespace both opted in and managed by Kueue.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from webhook.engine.kueue_flavors import pool_flavors
from webhook.policy import load_default_policy

from .admission_fixtures import OPT_IN, namespace_name
from .controlplane import ControlPlane
from .kueue import (
    MANAGED,
    QUEUE_NAME_LABEL,
    Kueue,
    cluster_queue,
    condition,
    kueue_fixture,
    local_queue,
)
from .nodes import nodes_in_pool
from .webhook_server import WebhookServer

__all__ = ["kueue_fixture"]

WORKLOAD = "gpu-admission.io/workload"
JOB_NAME = "batch.kubernetes.io/job-name"
GPU = "nvidia.com/gpu"
QUOTA = {"training": "4", "inference": "4"}
ADMITTED_WITHIN = 90.0


@pytest.fixture(scope="module")
def queues(controlplane: ControlPlane, admission: WebhookServer, kueue: Kueue) -> Iterator[None]:
    """A flavor of each pool as the command prints it, and a ClusterQueue of each with a
    GPU quota; deleted while Kueue still runs, to lift its finalizers."""
    flavors = pool_flavors(load_default_policy())
    queues = [cluster_queue(f"{pool}-cq", pool, {GPU: gpus}) for pool, gpus in QUOTA.items()]
    for obj in (*flavors, *queues):
        controlplane.apply(json.dumps(obj))
    try:
        yield
    finally:
        controlplane.delete("clusterqueue", [q["metadata"]["name"] for q in queues])
        controlplane.delete("resourceflavor", [f["metadata"]["name"] for f in flavors])


@pytest.fixture
def queued(
    controlplane: ControlPlane, queues: None, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A namespace opted in and managed by Kueue, with a LocalQueue of each pool."""
    name = controlplane.create_namespace(namespace_name(request, "kq"), {**OPT_IN, **MANAGED})
    for pool in QUOTA:
        controlplane.apply(json.dumps(local_queue(pool, name, f"{pool}-cq")))
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


def job(name: str, queue: str, workload: str = "training", parallelism: int = 2) -> str:
    """A Job of a class that asks for no GPU, as people write one for a queue."""
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: queue}},
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": {
                    "metadata": {"labels": {WORKLOAD: workload}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "registry.example/train:1"}],
                    },
                },
            },
        }
    )


def admitted_workload(kueue: Kueue, namespace: str, kind: str, name: str) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        found = kueue.workload_of(namespace, kind, name)
        status = None if found is None else condition(found, "Admitted")
        return found if status is not None and status["status"] == "True" else None

    return kueue.wait_for(admitted, ADMITTED_WITHIN, f"{kind} {namespace}/{name} to be admitted")


def reserved_gpus(controlplane: ControlPlane, queue: str) -> str:
    """The GPUs the ClusterQueue holds for admitted workloads (\"0\" for none)."""
    status = controlplane.get_json("clusterqueue", queue).get("status", {})
    for flavor in status.get("flavorsReservation", []):
        for resource in flavor.get("resources", []):
            if resource["name"] == GPU:
                return str(resource["total"])
    return "0"


def test_a_training_job_that_asks_no_gpu_is_charged_the_gpus_its_pods_get(
    controlplane: ControlPlane, kueue: Kueue, queued: str
) -> None:
    controlplane.apply(job("pretrain", "training"), namespace=queued)

    workload = admitted_workload(kueue, queued, "Job", "pretrain")

    (pod_set,) = workload["spec"]["podSets"]
    assert pod_set["count"] == 2
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"][GPU] == "1"
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"] == {GPU: "training"}
    assert assignment["resourceUsage"][GPU] == "2"
    kueue.wait_for(
        lambda: reserved_gpus(controlplane, "training-cq") == "2" or None,
        ADMITTED_WITHIN,
        "the ClusterQueue to count the 2 GPUs reserved",
    )
    nodes = controlplane.wait_for_bindings(queued, f"{JOB_NAME}=pretrain", 2)
    assert set(nodes) <= set(nodes_in_pool("training"))


def test_the_workload_is_ordered_at_its_class_priority(
    controlplane: ControlPlane, kueue: Kueue, queued: str
) -> None:
    controlplane.apply(job("ranked", "training"), namespace=queued)

    workload = admitted_workload(kueue, queued, "Job", "ranked")

    assert workload["spec"]["priorityClassRef"]["name"] == "training-priority"
    assert workload["spec"]["priority"] == 1000


def test_a_flavor_of_the_pools_taints_without_tolerations_admits_the_class(
    controlplane: ControlPlane, kueue: Kueue, queued: str
) -> None:
    controlplane.apply(job("tolerating", "training", parallelism=1), namespace=queued)

    admitted_workload(kueue, queued, "Job", "tolerating")

    stored = controlplane.get_json("job", "tolerating", queued)
    assert stored["spec"]["suspend"] is False
    template = stored["spec"]["template"]["spec"]
    assert template["nodeSelector"] == {"gpu-pool": "training"}  # the flavor's, by Kueue
    assert {
        "key": "gpu-pool",
        "operator": "Equal",
        "value": "training",
        "effect": "NoSchedule",
    } in (template["tolerations"])
    (node,) = controlplane.wait_for_bindings(queued, f"{JOB_NAME}=tolerating", 1)
    assert node in nodes_in_pool("training")


def test_a_training_job_in_the_inference_queue_waits_in_kueue_and_holds_no_quota(
    controlplane: ControlPlane, kueue: Kueue, queued: str
) -> None:
    controlplane.apply(job("misqueued", "inference"), namespace=queued)

    def pending() -> dict[str, Any] | None:
        found = kueue.workload_of(queued, "Job", "misqueued")
        reserved = None if found is None else condition(found, "QuotaReserved")
        return reserved if reserved is not None and reserved["status"] == "False" else None

    reason = kueue.wait_for(pending, ADMITTED_WITHIN, "Kueue to say why it waits")

    assert "inference" in reason["message"], reason
    assert reserved_gpus(controlplane, "inference-cq") == "0"
    assert controlplane.get_json("job", "misqueued", queued)["spec"]["suspend"] is True
    workload = kueue.workload_of(queued, "Job", "misqueued")
    assert workload is not None and "admission" not in workload.get("status", {})


def test_kueue_evicts_a_job_and_admits_it_again_through_the_webhooks(
    controlplane: ControlPlane, kueue: Kueue, queued: str
) -> None:
    controlplane.apply(job("evicted", "training", parallelism=1), namespace=queued)
    workload = admitted_workload(kueue, queued, "Job", "evicted")
    controlplane.wait_for_bindings(queued, f"{JOB_NAME}=evicted", 1)
    name = workload["metadata"]["name"]

    controlplane.kubectl(
        "patch", "workload", name, "-n", queued, "--type=merge", "-p", '{"spec":{"active":false}}'
    )
    kueue.wait_for(
        lambda: controlplane.get_json("job", "evicted", queued)["spec"]["suspend"] or None,
        ADMITTED_WITHIN,
        "Kueue to suspend the evicted Job",
    )

    def pods_deleted() -> bool | None:
        pods = controlplane.list_json("pods", queued, f"{JOB_NAME}=evicted")
        return all(p["metadata"].get("deletionTimestamp") for p in pods) or None

    kueue.wait_for(pods_deleted, ADMITTED_WITHIN, "the Job controller to delete its pod")
    controlplane.finish_terminating_pods(queued)  # what the node's kubelet would do
    controlplane.kubectl(
        "patch", "workload", name, "-n", queued, "--type=merge", "-p", '{"spec":{"active":true}}'
    )

    admitted_workload(kueue, queued, "Job", "evicted")
    kueue.wait_for(
        lambda: controlplane.get_json("job", "evicted", queued)["spec"]["suspend"] is False or None,
        ADMITTED_WITHIN,
        "Kueue to resume the Job",
    )
    (node,) = controlplane.wait_for_bindings(queued, f"{JOB_NAME}=evicted", 1, timeout=90.0)
    assert node in nodes_in_pool("training")


def test_a_plain_pod_of_a_class_goes_through_kueues_pod_integration(
    controlplane: ControlPlane, kueue: Kueue, queued: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "solo",
            "labels": {QUEUE_NAME_LABEL: "training", WORKLOAD: "training"},
        },
        "spec": {"containers": [{"name": "main", "image": "registry.example/train:1"}]},
    }

    controlplane.apply(json.dumps(pod), namespace=queued)

    workload = admitted_workload(kueue, queued, "Pod", "solo")
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"][GPU] == "1"
    node = controlplane.wait_for_binding(queued, "solo", timeout=ADMITTED_WITHIN)
    assert node in nodes_in_pool("training")
    stored = controlplane.get_json("pod", "solo", queued)
    assert stored["spec"]["priorityClassName"] == "training-priority"
    assert not stored["spec"].get("schedulingGates")


def test_the_audit_names_a_flavor_the_policy_contradicts(
    controlplane: ControlPlane, kueue: Kueue, queues: None
) -> None:
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "training-untainted"},
        "spec": {"nodeLabels": {"gpu-pool": "training"}},
    }
    controlplane.apply(json.dumps(flavor))
    try:
        audit = subprocess.run(
            [sys.executable, "-m", "webhook.cli", "audit", "--kubeconfig",
             str(controlplane.kubeconfig), "--output", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        controlplane.delete("resourceflavor", ["training-untainted"])

    assert audit.returncode in (0, 1), audit.stderr
    flavors = {f["name"]: f["contradictions"] for f in json.loads(audit.stdout)["kueueFlavors"]}
    assert list(flavors) == ["training-untainted"]
    (found,) = flavors["training-untainted"]
    assert "nodeTaints lack the pool's taint gpu-pool=training:NoSchedule" in found
