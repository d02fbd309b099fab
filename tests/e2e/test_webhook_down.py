"""Scenario 6: with gpu-admission down, only its own scope is refused.

Both webhooks fail closed, but their scope is narrow: opted-in namespaces
(never kube-system) and, through matchConditions, only pods the policy has an
opinion on. Everything else keeps being created while the service is down.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .admission_fixtures import example
from .controlplane import ControlPlane
from .webhook_server import WebhookServer


@pytest.fixture
def service_down(admission: WebhookServer) -> Iterator[WebhookServer]:
    admission.stop()
    try:
        yield admission
    finally:
        admission.start(admission.policy_path)


def test_gpu_pods_in_opted_in_namespaces_are_refused_with_the_failure_policy_message(
    controlplane: ControlPlane, opted_in: str, service_down: WebhookServer
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
