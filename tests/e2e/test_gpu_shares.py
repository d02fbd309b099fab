"""GPU shares through a real kube-apiserver, as a tenant with its own token writes them:
a pod as the KAI Scheduler's GPU-sharing documentation writes it (``schedulerName:
kai-scheduler``, ``gpu-fraction: "0.5"``) with the class label added is stored with its
class's placement and priority and no whole GPU where the class's pool shares through
KAI fractions, and refused naming the fraction where it does not; without the label the
unclassed webhook's condition sends it and it is refused as a GPU pod of no class."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from webhook.policy.load import default_policy_text

from .controlplane import ControlPlane
from .tenants import Tenant, make_tenant
from .test_hostile_tenant import WORKLOAD
from .webhook_server import WebhookServer

VALIDATE = 'admission webhook "validate.gpu-admission.io" denied'


@pytest.fixture(scope="module")
def kai_pools(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebhookServer]:
    """The default policy with its inference pool sharing through KAI fractions."""
    policy = tmp_path_factory.mktemp("kai") / "policy.yaml"
    text = default_policy_text().replace(
        "    # sharing: kaiFractions\n", "    sharing: kaiFractions\n"
    )
    policy.write_text(text, "utf-8")
    with admission.serving(controlplane.kubeconfig, policy):
        yield admission


@pytest.fixture
def tenant(
    controlplane: ControlPlane, kai_pools: WebhookServer, opted_in: str, tmp_path: Path
) -> Tenant:
    return make_tenant(controlplane, opted_in, tmp_path)


def fraction_pod(name: str, label: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {WORKLOAD: label} if label else {},
            "annotations": {"gpu-fraction": "0.5"},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "image": "registry.example/app:1"}],
        },
    }


def test_a_kai_fraction_of_a_class_is_placed_at_its_priority_without_a_whole_gpu(
    tenant: Tenant,
) -> None:
    tenant.create(fraction_pod("half", "inference"))

    stored = json.loads(tenant.kubectl("get", "pod", "half", "-o", "json").stdout)["spec"]
    assert stored["priorityClassName"] == "inference-priority"
    assert stored["affinity"]["nodeAffinity"]
    assert "nvidia.com/gpu" not in json.dumps(stored["containers"])


def test_a_kai_fraction_of_a_class_whose_pools_do_not_share_so_is_refused(
    tenant: Tenant,
) -> None:
    result = tenant.create(fraction_pod("training-half", "training"), check=False)

    assert result.returncode != 0, result.stdout
    assert VALIDATE in result.stderr
    assert "asks for gpu-fraction=0.5 (the KAI Scheduler's GPU fractions)" in result.stderr
    assert "pool training shares none" in result.stderr


def test_a_kai_fraction_without_a_class_is_refused_as_a_gpu_pod(tenant: Tenant) -> None:
    result = tenant.create(fraction_pod("unlabelled-half", None), check=False)

    assert result.returncode != 0, result.stdout
    assert 'admission webhook "validate-unclassed.gpu-admission.io" denied' in result.stderr
    assert "pod requests gpu-fraction=0.5 but has no label" in result.stderr


def test_a_fraction_added_to_a_pod_of_no_class_after_its_create_is_refused(
    tenant: Tenant,
) -> None:
    cpu_pod = fraction_pod("cpu-then-half", None)
    cpu_pod["metadata"]["annotations"] = {}
    cpu_pod["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    tenant.create(cpu_pod)

    result = tenant.kubectl("annotate", "pod", "cpu-then-half", "gpu-fraction=0.5", check=False)

    assert result.returncode != 0, result.stdout
    assert "the update changes annotation 'gpu-fraction' from none to '0.5'" in result.stderr
    stored = json.loads(tenant.kubectl("get", "pod", "cpu-then-half", "-o", "json").stdout)
    assert "gpu-fraction" not in stored["metadata"].get("annotations", {})
