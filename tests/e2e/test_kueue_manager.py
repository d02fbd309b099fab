"""Kueue's real manager on the control plane (``kueue.py``), alone: a Job naming a
LocalQueue is created suspended by Kueue's webhook, gets a Workload, is admitted within
its ClusterQueue's GPU and CPU quota and let run on the nodes of the queue's flavor.

gpu-admission plays no part: its webhooks are not registered here (configurations other
modules of the session registered act only on namespaces opted in to it, and these are
not). The flavor is the fleet's A100 80GB training nodes, selected by the product label
GPU Feature Discovery gives them and tolerating their pool's taint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from .controlplane import ControlPlane
from .kueue import (
    QUEUE_NAME_LABEL,
    Kueue,
    cluster_queue,
    condition,
    kueue_fixture,
    local_queue,
    resource_flavor,
)
from .nodes import POOL_LABEL, PRODUCT_LABEL, NodeSpec

# The fixture `kueue`: pytest finds it through this import.
__all__ = ["kueue_fixture"]

NAMESPACE = "kueue-smoke"
UNMANAGED = "kueue-smoke-unmanaged"
FLAVOR = "a100-80gb"
CLUSTER_QUEUE = "kueue-smoke-training"
LOCAL_QUEUE = "training"
PRODUCT = "NVIDIA-A100-SXM4-80GB"
QUOTA = {"cpu": "16", "nvidia.com/gpu": "8"}
JOB = "train"
JOB_GPUS = 2
ADMISSION_TIMEOUT = 60.0


def training_job(name: str, gpus: int) -> dict[str, Any]:
    """A Job of one pod asking ``gpus`` GPUs and a CPU, in the LocalQueue; nothing in it
    says where to run or tolerates a taint: admission puts that in from the flavor."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_NAME_LABEL: LOCAL_QUEUE}},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:1",
                            "resources": {
                                "requests": {"cpu": "1"},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                }
            },
        },
    }


def create(controlplane: ControlPlane, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """``kubectl create``: the object as stored, after every mutating webhook."""
    created = controlplane.kubectl(
        "create", "-f", "-", "--namespace", namespace, "--output=json", input=json.dumps(manifest)
    )
    stored: dict[str, Any] = json.loads(created.stdout)
    return stored


def is_true(obj: dict[str, Any] | None, kind: str) -> bool:
    found = condition(obj or {}, kind)
    return found is not None and found.get("status") == "True"


@pytest.fixture(scope="module")
def queues(controlplane: ControlPlane, kueue: Kueue, gpu_fleet: list[NodeSpec]) -> Iterator[str]:
    """The flavor, a ClusterQueue of ``QUOTA`` of it and a LocalQueue in a namespace Kueue
    manages, whose name this returns; all deleted at the end while Kueue runs, so that its
    finalizers are lifted."""
    toleration = {
        "key": POOL_LABEL,
        "operator": "Equal",
        "value": "training",
        "effect": "NoSchedule",
    }
    controlplane.apply(json.dumps(resource_flavor(FLAVOR, {PRODUCT_LABEL: PRODUCT}, [toleration])))
    controlplane.apply(json.dumps(cluster_queue(CLUSTER_QUEUE, FLAVOR, QUOTA)))
    namespace = kueue.create_namespace(NAMESPACE)
    controlplane.apply(json.dumps(local_queue(LOCAL_QUEUE, namespace, CLUSTER_QUEUE)))
    try:
        yield namespace
    finally:
        controlplane.delete_namespace(namespace)
        controlplane.delete("clusterqueue", [CLUSTER_QUEUE])
        controlplane.delete("resourceflavor", [FLAVOR])
        kueue.wait_for(
            lambda: (
                not controlplane.exists("clusterqueue", CLUSTER_QUEUE)
                and not controlplane.exists("resourceflavor", FLAVOR)
            ),
            60,
            "Kueue to let the ClusterQueue and the flavor go",
        )


@pytest.fixture(scope="module")
def job(controlplane: ControlPlane, queues: str) -> dict[str, Any]:
    """The training Job as kube-apiserver stored it at its creation."""
    return create(controlplane, queues, training_job(JOB, JOB_GPUS))


@pytest.fixture(scope="module")
def admitted(kueue: Kueue, queues: str, job: dict[str, Any]) -> dict[str, Any]:
    """The Job's Workload once Kueue has admitted it."""

    def workload() -> dict[str, Any] | None:
        found = kueue.workload_of(queues, "Job", JOB)
        return found if is_true(found, "Admitted") else None

    return kueue.wait_for(workload, ADMISSION_TIMEOUT, f"the Workload of Job {JOB} to be admitted")


def test_the_cluster_queue_is_active_with_its_flavor_and_quota(
    controlplane: ControlPlane, kueue: Kueue, queues: str
) -> None:
    active = kueue.wait_for(
        lambda: is_true(controlplane.get_json("clusterqueue", CLUSTER_QUEUE), "Active"),
        ADMISSION_TIMEOUT,
        f"ClusterQueue {CLUSTER_QUEUE} to be active",
    )

    assert active
    assert kueue.wait_for(
        lambda: is_true(controlplane.get_json("localqueue", LOCAL_QUEUE, queues), "Active"),
        ADMISSION_TIMEOUT,
        f"LocalQueue {LOCAL_QUEUE} to be active",
    )


def test_a_job_naming_a_local_queue_is_created_suspended_by_kueues_webhook(
    job: dict[str, Any],
) -> None:
    assert "suspend" not in training_job(JOB, JOB_GPUS)["spec"]
    assert job["spec"]["suspend"] is True


def test_the_job_gets_a_workload_in_its_local_queue_asking_what_its_pod_asks(
    kueue: Kueue, queues: str, job: dict[str, Any]
) -> None:
    workload = kueue.wait_for(
        lambda: kueue.workload_of(queues, "Job", JOB), ADMISSION_TIMEOUT, f"a Workload of {JOB}"
    )

    assert workload["spec"]["queueName"] == LOCAL_QUEUE
    [pod_set] = workload["spec"]["podSets"]
    assert pod_set["count"] == 1
    [container] = pod_set["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(JOB_GPUS)


def test_the_workload_is_admitted_within_the_cluster_queues_gpu_and_cpu_quota(
    admitted: dict[str, Any],
) -> None:
    assert is_true(admitted, "QuotaReserved")
    admission = admitted["status"]["admission"]
    assert admission["clusterQueue"] == CLUSTER_QUEUE
    [assignment] = admission["podSetAssignments"]
    assert assignment["flavors"] == {"cpu": FLAVOR, "nvidia.com/gpu": FLAVOR}
    assert assignment["resourceUsage"]["nvidia.com/gpu"] == str(JOB_GPUS)


def test_the_admitted_job_is_unsuspended_and_its_pod_bound_to_a_node_of_the_flavor(
    controlplane: ControlPlane, kueue: Kueue, queues: str, admitted: dict[str, Any]
) -> None:
    unsuspended = kueue.wait_for(
        lambda: controlplane.get_json("job", JOB, queues)["spec"]["suspend"] is False,
        ADMISSION_TIMEOUT,
        f"Job {JOB} to be unsuspended",
    )
    [node] = controlplane.wait_for_bindings(queues, f"job-name={JOB}", 1)

    assert unsuspended
    [pod] = controlplane.list_json("pods", queues, f"job-name={JOB}")
    assert pod["spec"]["nodeSelector"][PRODUCT_LABEL] == PRODUCT
    assert controlplane.get_json("node", node)["metadata"]["labels"][PRODUCT_LABEL] == PRODUCT


def test_a_job_beyond_the_quota_stays_suspended_with_its_workload_pending(
    controlplane: ControlPlane, kueue: Kueue, queues: str, admitted: dict[str, Any]
) -> None:
    create(controlplane, queues, training_job("too-big", 8))

    def refused() -> dict[str, Any] | None:
        workload = kueue.workload_of(queues, "Job", "too-big")
        reserved = condition(workload or {}, "QuotaReserved")
        return workload if reserved and reserved["status"] == "False" else None

    workload = kueue.wait_for(refused, ADMISSION_TIMEOUT, "the Workload of too-big to be refused")

    assert not is_true(workload, "Admitted")
    assert controlplane.get_json("job", "too-big", queues)["spec"]["suspend"] is True


def test_the_cluster_queue_reads_as_v1beta1_through_kueues_conversion_webhook(
    controlplane: ControlPlane, queues: str
) -> None:
    old = controlplane.get_json("clusterqueues.v1beta1.kueue.x-k8s.io", CLUSTER_QUEUE)

    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    [group] = old["spec"]["resourceGroups"]
    assert [flavor["name"] for flavor in group["flavors"]] == [FLAVOR]


def test_a_pod_naming_a_queue_is_gated_where_kueue_manages_and_untouched_elsewhere(
    controlplane: ControlPlane, kueue: Kueue, queues: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain", "labels": {QUEUE_NAME_LABEL: LOCAL_QUEUE}},
        "spec": {"containers": [{"name": "main", "image": "registry.example/app:1"}]},
    }
    controlplane.create_namespace(UNMANAGED)
    try:
        managed = create(controlplane, queues, pod)
        unmanaged = create(controlplane, UNMANAGED, pod)
    finally:
        controlplane.delete_namespace(UNMANAGED, wait=False)

    assert {"name": "kueue.x-k8s.io/admission"} in managed["spec"].get("schedulingGates", [])
    assert "schedulingGates" not in unmanaged["spec"]
