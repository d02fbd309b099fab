"""Hostile round 4, what a pod takes by reference judged where it is used: a tenant of an
opted-in namespace, with its own token, has a ConfigMap (or Secret) holding
NVIDIA_VISIBLE_DEVICES written before its namespace opted in, where no webhook judged
it, and takes it whole with envFrom in a one-GPU container. The service reads the key
names of what the pod takes at its CREATE (as installed, with the live inventory) and
refuses it; the object's value is never in the answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .admission_fixtures import class_pod
from .controlplane import ControlPlane
from .tenants import Tenant, make_tenant
from .test_hostile_tenant import WORKLOAD, admitted_before_opt_in
from .webhook_server import WebhookServer

VALUE = "all-gpus-of-the-node"
DENIED_BY = 'admission webhook "validate.gpu-admission.io" denied the request'


@pytest.fixture(scope="module")
def live(controlplane: ControlPlane, admission: WebhookServer) -> Iterator[WebhookServer]:
    """gpu-admission on the default policy, reading the cluster as installed."""
    with admission.serving(controlplane.kubeconfig, kubeconfig=controlplane.kubeconfig):
        yield admission


@pytest.fixture
def tenant(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str, tmp_path: Path
) -> Tenant:
    return make_tenant(controlplane, opted_in, tmp_path)


def holding(kind: str, name: str, **data: str) -> dict[str, Any]:
    field = "stringData" if kind == "Secret" else "data"
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, field: data}


def taking_whole(name: str, kind: str, source: str) -> dict[str, Any]:
    pod = class_pod(name, WORKLOAD)
    reference = "secretRef" if kind == "Secret" else "configMapRef"
    pod["spec"]["containers"][0]["envFrom"] = [{reference: {"name": source}}]
    return pod


@pytest.mark.parametrize("kind", ["ConfigMap", "Secret"])
def test_an_object_written_before_opt_in_holding_a_device_variable_cannot_be_taken_whole(
    tenant: Tenant, controlplane: ControlPlane, kind: str
) -> None:
    admitted_before_opt_in(
        controlplane, tenant.namespace, holding(kind, "old-env", NVIDIA_VISIBLE_DEVICES=VALUE)
    )

    result = tenant.create(taking_whole("takes-all", kind, "old-env"), check=False)

    assert result.returncode != 0, result.stdout
    assert DENIED_BY in result.stderr, result.stderr
    assert f"takes every key of {kind} 'old-env'" in result.stderr
    assert "NVIDIA_VISIBLE_DEVICES" in result.stderr
    assert VALUE not in result.stderr
    listed = tenant.kubectl("get", "pods", "-o", "name").stdout
    assert "takes-all" not in listed


def test_an_object_of_harmless_keys_is_taken_whole(tenant: Tenant) -> None:
    tenant.create(holding("ConfigMap", "settings", MODEL="llama", BATCH_SIZE="8"))

    assert tenant.create(taking_whole("takes-settings", "ConfigMap", "settings")).returncode == 0


def test_an_object_written_after_the_pod_is_judged_at_its_write(tenant: Tenant) -> None:
    tenant.create(taking_whole("takes-later", "ConfigMap", "later"))

    result = tenant.create(holding("ConfigMap", "later", NVIDIA_VISIBLE_DEVICES=VALUE), check=False)

    assert result.returncode != 0, result.stdout
    assert "validate-env-keys.gpu-admission.io" in result.stderr
