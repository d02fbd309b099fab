"""Scenario 5: inference overflows into training and preempts it, as the practice promises.

With policies/overflow.yaml, inference pods may use both pools, prefer their
own, and carry priority 1000000. When the inference pool is full, kube-scheduler
preempts training pods (priority 1000) to place them, which only works because
the mutation set `spec.priority`, not just `priorityClassName`. A
PodDisruptionBudget on the training pods limits the victims to what it allows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from .admission_fixtures import REPO, example
from .controlplane import ControlPlane
from .nodes import FLEET, nodes_in_pool
from .webhook_server import WebhookServer

TRAINING_NODES = nodes_in_pool("training")
INFERENCE_WHOLE_GPUS = sum(
    int(n.capacity.get("nvidia.com/gpu", "0")) for n in FLEET if n.pool == "inference"
)
GPUS_PER_INFERENCE_POD = 4


@pytest.fixture
def overflow_policy(controlplane: ControlPlane, admission: WebhookServer) -> Iterator[None]:
    with admission.serving(controlplane.kubeconfig, REPO / "policies" / "overflow.yaml"):
        yield


def training_job(replicas: int) -> str:
    job = yaml.safe_load(example("training-job.yaml"))
    job["metadata"]["name"] = "pretrain"
    job["spec"]["parallelism"] = job["spec"]["completions"] = replicas
    return json.dumps(job)


def inference_deployment(replicas: int) -> str:
    deployment = yaml.safe_load(example("inference-deployment.yaml"))
    deployment["spec"]["replicas"] = replicas
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["limits"]["nvidia.com/gpu"] = GPUS_PER_INFERENCE_POD
    return json.dumps(deployment)


PDB = """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: pretrain
spec:
  minAvailable: {min_available}
  selector:
    matchLabels:
      batch.kubernetes.io/job-name: pretrain
"""


def test_inference_preempts_training_when_its_own_pool_is_full(
    controlplane: ControlPlane, opted_in: str, overflow_policy: None
) -> None:
    trainers = len(TRAINING_NODES)
    controlplane.apply(training_job(trainers), namespace=opted_in)
    controlplane.apply(PDB.format(min_available=trainers - 1), namespace=opted_in)
    assert set(
        controlplane.wait_for_bindings(opted_in, "batch.kubernetes.io/job-name=pretrain", trainers)
    ) == set(TRAINING_NODES)

    fill = INFERENCE_WHOLE_GPUS // GPUS_PER_INFERENCE_POD
    controlplane.apply(inference_deployment(fill), namespace=opted_in)
    inference_nodes = controlplane.wait_for_bindings(opted_in, "app=llm-server", fill)
    assert set(inference_nodes) <= set(nodes_in_pool("inference")), inference_nodes
    victims_before = _training_pods(controlplane, opted_in)

    controlplane.apply(inference_deployment(fill + 1), namespace=opted_in)

    def victims_gone() -> list[str] | None:
        # No kubelet: the victims stay Terminating until we finish their deletion.
        controlplane.finish_terminating_pods(opted_in)
        gone = [
            name for name in victims_before if name not in _training_pods(controlplane, opted_in)
        ]
        return gone or None

    victims = controlplane.wait_for(victims_gone, timeout=90, what="a training pod to be preempted")
    nodes = controlplane.wait_for_bindings(opted_in, "app=llm-server", fill + 1, timeout=90)

    overflowed = [n for n in nodes if n in TRAINING_NODES]
    assert len(overflowed) == 1, nodes
    assert len(victims) == 1, f"the PodDisruptionBudget allows one victim, got {victims}"

    # kube-scheduler records the event asynchronously, after the victim may be gone.
    controlplane.wait_for_event(opted_in, victims[0], "Preempted", timeout=30)


def _training_pods(controlplane: ControlPlane, namespace: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in controlplane.list_json("pods", namespace, "batch.kubernetes.io/job-name=pretrain")
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]
