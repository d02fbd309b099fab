"""Scenario 6: with gpu-admission down, only GPU work is refused.

The webhooks fail closed, but their scope is narrow: opted-in namespaces (never
kube-system) and, through object selectors and matchConditions, only pods and objects
the policy has an opinion on; no webhook is called for the binding of a pod (a claim's
reservation is judged instead, which only pods with claims need). So while every replica
is down, stopped (connections refused at once) or stalled (SIGSTOP: connections open,
nothing answers, kube-apiserver waits out each call), the ordinary pods and Deployments
of an opted-in namespace are created and bound, and GPU pods are refused naming the
webhook.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .admission_fixtures import example
from .controlplane import ControlPlane
from .webhook_server import WebhookServer

OUTAGES = ("stopped", "stalled")
BOUND_WITHIN = 30.0


@pytest.fixture
def service_down(admission: WebhookServer) -> Iterator[WebhookServer]:
    admission.stop()
    try:
        yield admission
    finally:
        admission.start(admission.policy_path)


@pytest.fixture(params=OUTAGES)
def outage(admission: WebhookServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """Every replica (the one) down, as `stopped` or `stalled`."""
    if request.param == "stalled":
        with admission.paused():
            yield request.param
        return
    admission.stop()
    try:
        yield request.param
    finally:
        admission.start(admission.policy_path)


CPU_DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: 2
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
        - name: api
          image: registry.example/api:3
          resources: {requests: {cpu: 100m, memory: 128Mi}}
"""


def test_the_ordinary_pods_of_an_opted_in_namespace_are_created_and_bound_in_an_outage(
    controlplane: ControlPlane, opted_in: str, outage: str
) -> None:
    controlplane.apply(example("cpu-pod.yaml"), namespace=opted_in)
    controlplane.apply(CPU_DEPLOYMENT, namespace=opted_in)

    assert controlplane.wait_for_binding(opted_in, "etl", timeout=BOUND_WITHIN)
    assert len(controlplane.wait_for_bindings(opted_in, "app=api", 2, timeout=BOUND_WITHIN)) == 2


def test_gpu_pods_are_refused_in_an_outage_naming_the_webhook(
    controlplane: ControlPlane, opted_in: str, outage: str
) -> None:
    result = controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in, check=False)

    assert result.returncode != 0
    assert 'failed calling webhook "mutate.gpu-admission.io"' in result.stderr


def test_pods_outside_the_scope_are_still_created(
    controlplane: ControlPlane,
    opted_in: str,
    plain_namespace: str,
    service_down: WebhookServer,
) -> None:
    controlplane.apply(example("cpu-pod.yaml"), namespace=opted_in)
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=plain_namespace)
    pod = example("cpu-pod.yaml").replace("name: etl\n", "name: etl-system-check\n", 1)
    controlplane.apply(pod.replace("tolerations", "x"), namespace="kube-system")
    try:
        assert controlplane.exists("pod", "etl", opted_in)
        assert controlplane.exists("pod", "embedder", plain_namespace)
        assert controlplane.exists("pod", "etl-system-check", "kube-system")
    finally:
        controlplane.finish_pod_deletion("kube-system", "etl-system-check")


def test_the_service_is_back_after_a_restart(
    controlplane: ControlPlane, opted_in: str, admission: WebhookServer
) -> None:
    result = controlplane.apply(
        example("denied/too-many-gpus.yaml"), namespace=opted_in, check=False
    )

    assert "requests 9 nvidia.com/gpu" in result.stderr
