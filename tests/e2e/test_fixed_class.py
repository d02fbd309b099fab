"""Hostile round 4, a pod's class fixed once it exists: a tenant of an opted-in namespace,
with its own token, changes what its running pods were admitted as. kube-apiserver lets
labels and annotations of a running pod change; the webhooks (validate-updates, whose
judged-change condition kube-apiserver evaluates) refuse these, and nothing is stored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .admission_fixtures import class_pod
from .controlplane import ControlPlane
from .tenants import Tenant, make_tenant
from .test_hostile_tenant import WORKLOAD, admitted_before_opt_in
from .webhook_server import WebhookServer

UPDATES_DENIED = re.compile(
    r'admission webhook "validate-(updates|unclassed)\.gpu-admission\.io" denied'
)
"""The pod's update goes to validate-updates (its class before or after) and, once it has
none, to validate-unclassed too: the first to answer refuses it."""


@pytest.fixture
def tenant(
    controlplane: ControlPlane, admission: WebhookServer, opted_in: str, tmp_path: Path
) -> Tenant:
    made = make_tenant(controlplane, opted_in, tmp_path)
    made.create(class_pod("admitted", WORKLOAD))
    return made


def metadata(tenant: Tenant, name: str = "admitted") -> dict[str, dict[str, str]]:
    found = json.loads(tenant.kubectl("get", "pod", name, "-o", "json").stdout)["metadata"]
    return {"labels": found.get("labels", {}), "annotations": found.get("annotations", {})}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (f"{WORKLOAD}-", f"changes label '{WORKLOAD}' from 'inference' to none"),
        (f"{WORKLOAD}=training", "from 'inference' to 'training'"),
        (f"{WORKLOAD}=batch", "from 'inference' to 'batch'"),
        ("gpu-admission.io/gpu-model=H100", "changes label 'gpu-admission.io/gpu-model'"),
    ],
    ids=["dropped", "another-class", "no-such-class", "gpu-model"],
)
def test_the_labels_a_running_pod_was_admitted_by_cannot_change(
    tenant: Tenant, change: str, said: str
) -> None:
    before = metadata(tenant)

    result = tenant.kubectl("label", "pod", "admitted", change, "--overwrite", check=False)

    assert result.returncode != 0, result.stdout
    assert UPDATES_DENIED.search(result.stderr), result.stderr
    assert said in result.stderr
    assert metadata(tenant) == before


def test_a_cdi_annotation_cannot_be_added_to_a_running_pod(tenant: Tenant) -> None:
    result = tenant.kubectl(
        "annotate", "pod", "admitted", "nvidia.cdi.k8s.io/pod=nvidia.com/gpu=all", check=False
    )

    assert result.returncode != 0, result.stdout
    assert UPDATES_DENIED.search(result.stderr), result.stderr
    assert "asks the container runtime for CDI devices" in result.stderr
    assert "nvidia.cdi.k8s.io/pod" not in metadata(tenant)["annotations"]


def test_other_labels_and_annotations_of_a_running_pod_may_change(tenant: Tenant) -> None:
    assert tenant.kubectl("label", "pod", "admitted", "team=vision").returncode == 0
    assert tenant.kubectl("annotate", "pod", "admitted", "note=kept").returncode == 0
    assert metadata(tenant)["labels"]["team"] == "vision"


def test_a_privileged_debug_container_is_refused_in_a_pod_of_no_class_that_may_reach_a_gpu_node(
    tenant: Tenant,
) -> None:
    """Such a pod is refused at its CREATE in an opted-in namespace (non-gpu-placement);
    this one was made before the namespace opted in."""
    anywhere = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "anywhere"},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.example/tool:1"}],
        },
    }
    admitted_before_opt_in(tenant.controlplane, tenant.namespace, anywhere)
    debugger = {
        "name": "debugger",
        "image": "registry.example/debug:1",
        "securityContext": {"privileged": True},
    }

    result = tenant.kubectl(
        "patch", "pod", "anywhere", "--subresource=ephemeralcontainers", "--type=strategic",
        "-p", json.dumps({"spec": {"ephemeralContainers": [debugger]}}), check=False,
    )  # fmt: skip

    assert result.returncode != 0, result.stdout
    assert "denied the request" in result.stderr
    assert "ephemeral container 'debugger' is privileged" in result.stderr
    found = json.loads(tenant.kubectl("get", "pod", "anywhere", "-o", "json").stdout)
    assert not found["spec"].get("ephemeralContainers")
