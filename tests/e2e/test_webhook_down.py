"""Scenario 6: with gpu-admission down, only GPU work is refused.

The webhooks fail closed, but their scope is narrow: opted-in namespaces (never
kube-system) and, through object selectors and matchConditions, only pods and objects
the policy has an opinion on; no webhook is called for the binding of a pod (a claim's
reservation is judged instead, which only pods with claims need). So while every replica
is down, stopped or killed (connections refused at once) or stalled (SIGSTOP: connections open,
nothing answers, kube-apiserver waits out each call), the ordinary pods and Deployments
of an opted-in namespace are created and bound, and GPU pods are refused naming the
webhook.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

import pytest
import yaml

from .admission_fixtures import REPO, example
from .apiserver_metrics import scraped
from .controlplane import ControlPlane
from .webhook_server import WebhookServer

OUTAGES = ("stopped", "killed", "stalled")
BOUND_WITHIN = 30.0


@pytest.fixture
def service_down(admission: WebhookServer) -> Iterator[WebhookServer]:
    admission.stop()
    try:
        yield admission
    finally:
        admission.start(admission.policy_path)


@contextlib.contextmanager
def down(admission: WebhookServer, outage: str) -> Iterator[str]:
    """Every replica (the one) down, as `stopped` (SIGTERM), `killed` (SIGKILL) or
    `stalled` (SIGSTOP), then back."""
    if outage == "stalled":
        with admission.paused():
            yield outage
        return
    if outage == "killed":
        admission.kill()
    else:
        admission.stop()
    try:
        yield outage
    finally:
        admission.start(admission.policy_path)


@pytest.fixture(params=OUTAGES)
def outage(admission: WebhookServer, request: pytest.FixtureRequest) -> Iterator[str]:
    with down(admission, request.param) as kind:
        yield kind


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


@pytest.mark.parametrize("outage_kind", OUTAGES)
def test_gpu_pods_are_admitted_again_once_the_service_answers(
    controlplane: ControlPlane, opted_in: str, admission: WebhookServer, outage_kind: str
) -> None:
    with down(admission, outage_kind):
        cpu = controlplane.apply(example("cpu-pod.yaml").replace("etl", "etl-0"), opted_in)
        gpu = controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in, check=False)

    admitted = controlplane.apply(
        example("mig-inference-pod.yaml"), namespace=opted_in, check=False
    )

    assert cpu.returncode == 0  # the CPU pod, for comparison, never waits on us
    assert gpu.returncode != 0
    assert admitted.returncode == 0, admitted.stderr


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


AUTOSCALER = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: api
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: api}
  minReplicas: 1
  maxReplicas: 3
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
"""
ALERTS = REPO / "deploy" / "monitoring" / "alerts.yaml"
DASHBOARD = REPO / "deploy" / "monitoring" / "dashboard.json"


def test_kube_apiserver_counts_the_failed_calls_its_alerts_read(
    controlplane: ControlPlane, opted_in: str, outage: str
) -> None:
    controlplane.apply(example("mig-inference-pod.yaml"), namespace=opted_in, check=False)
    controlplane.apply(AUTOSCALER, namespace=opted_in)  # warn-autoscalers fails open

    series = scraped(controlplane)

    rejected = [
        value
        for labels, value in series["apiserver_admission_webhook_rejection_count"]
        if labels.get("name") == "mutate.gpu-admission.io"
        and labels.get("error_type") == "calling_webhook_error"
    ]
    assert rejected and rejected[0] >= 1
    assert any(
        labels.get("name") == "warn-autoscalers.gpu-admission.io" and value >= 1
        for labels, value in series["apiserver_admission_webhook_fail_open_count"]
    )
    groups = yaml.safe_load(ALERTS.read_text("utf-8"))["spec"]["groups"]
    [apiserver] = [group for group in groups if group["name"] == "gpu-admission-kube-apiserver"]
    read = {n for rule in apiserver["rules"] for n in re.findall(r"apiserver_\w+", rule["expr"])}
    assert read <= set(series)
    dashboard = json.loads(DASHBOARD.read_text("utf-8"))
    shown = {
        n
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for n in re.findall(r"apiserver_\w+", target["expr"])
    }
    assert shown and shown <= set(series)
