"""Hostile round 3, tried as a tenant of an opted-in namespace with its own token.

A ServiceAccount of the namespace, allowed pods, debug containers and ConfigMaps there
and nothing else (:mod:`.tenants`), tries what got through before: mounts the NVIDIA
Container Toolkit reads as device requests because their path starts with its folder's
name (no slash after it), a volume no container mounts handed later to a debug
container, and the host sockets of the container runtime and the kubelet's device
plugins. The namespace enforces no Pod Security level, as an opted-in namespace may not:
hostPath volumes pass Pod Security there, and gpu-admission alone refuses these (and,
since host-access, every folder of the node the policy does not allow).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .admission_fixtures import class_pod
from .controlplane import ControlPlane
from .tenants import Tenant, make_tenant
from .webhook_server import WebhookServer

WORKLOAD = "gpu-admission.io/workload"
DEVICES = "/var/run/nvidia-container-devices"
DENIED_BY = 'admission webhook "validate.gpu-admission.io" denied the request'


@pytest.fixture
def tenant(
    controlplane: ControlPlane, admission: WebhookServer, opted_in: str, tmp_path: Path
) -> Tenant:
    return make_tenant(controlplane, opted_in, tmp_path)


def with_volume(
    name: str, host_path: str, mount_path: str | None, *, workload: str = "inference"
) -> dict[str, Any]:
    """A class pod with a hostPath volume, mounted at `mount_path` by a sidecar without
    GPUs (not mounted at all when None)."""
    manifest = class_pod(name, WORKLOAD)
    manifest["metadata"]["labels"][WORKLOAD] = workload
    spec = manifest["spec"]
    spec["volumes"] = [{"name": "host", "hostPath": {"path": host_path}}]
    if mount_path is not None:
        spec["containers"].append(
            {
                "name": "sidecar",
                "image": "registry.example/sidecar:1",
                "volumeMounts": [{"name": "host", "mountPath": mount_path}],
            }
        )
    return manifest


@pytest.mark.parametrize(
    ("workload", "mount_path"),
    [("inference", f"{DEVICES}all"), ("training", f"{DEVICES}imex/0")],
)
def test_a_mount_path_that_starts_with_the_toolkits_folder_name_is_refused(
    tenant: Tenant, workload: str, mount_path: str
) -> None:
    result = tenant.create(
        with_volume("prefixed", "/dev/null", mount_path, workload=workload), check=False
    )

    assert result.returncode != 0, result.stdout
    assert DENIED_BY in result.stderr
    assert f"container 'sidecar' mounts a volume at '{mount_path}'" in result.stderr
    assert "device request of the NVIDIA runtime's volume-mounts strategy" in result.stderr


def admitted_before_opt_in(
    controlplane: ControlPlane, namespace: str, manifest: dict[str, Any]
) -> None:
    """`manifest` created while `namespace` was not opted in (the webhooks never saw it),
    then the namespace opted in again: a pod no rule of today would admit."""
    controlplane.kubectl("label", "namespace", namespace, "gpu-admission.io/enabled-")
    try:
        controlplane.apply(json.dumps(manifest), namespace=namespace)
    finally:
        controlplane.kubectl("label", "namespace", namespace, "gpu-admission.io/enabled=true")


def test_a_debug_container_may_not_mount_a_volume_the_pod_was_admitted_with_as_a_request(
    tenant: Tenant, controlplane: ControlPlane
) -> None:
    admitted_before_opt_in(controlplane, tenant.namespace, with_volume("holder", "/dev/null", None))
    debugger = {
        "name": "debugger",
        "image": "registry.example/debug:1",
        "volumeMounts": [{"name": "host", "mountPath": f"{DEVICES}/all"}],
    }

    result = tenant.kubectl(
        "patch", "pod", "holder", "--subresource=ephemeralcontainers", "--type=strategic",
        "-p", json.dumps({"spec": {"ephemeralContainers": [debugger]}}), check=False,
    )  # fmt: skip

    assert result.returncode != 0, result.stdout
    assert DENIED_BY in result.stderr
    assert f"ephemeral container 'debugger' mounts a volume at '{DEVICES}/all'" in result.stderr
    pod = json.loads(tenant.kubectl("get", "pod", "holder", "-o", "json").stdout)
    assert not pod["spec"].get("ephemeralContainers")


@pytest.mark.parametrize(
    "host_path",
    [
        "/var/lib/kubelet/device-plugins",
        "/run/containerd/containerd.sock",
        "/var/lib/kubelet/pod-resources",
    ],
)
def test_a_host_socket_of_the_runtime_or_the_device_plugins_is_refused(
    tenant: Tenant, host_path: str
) -> None:
    result = tenant.create(with_volume("sockets", host_path, "/host"), check=False)

    assert result.returncode != 0, result.stdout
    assert DENIED_BY in result.stderr
    assert f"mounts '{host_path}' of the node" in result.stderr
    assert "container runtime, kubelet device plugins or NVIDIA stack" in result.stderr


def test_the_tenant_may_create_a_class_pod_with_a_volume_of_its_own(tenant: Tenant) -> None:
    """A folder of the node is the policy's to allow (tests/e2e/test_host_access.py)."""
    manifest = with_volume("ordinary", "/var/lib/models", "/models")
    manifest["spec"]["volumes"] = [{"name": "host", "emptyDir": {}}]

    assert tenant.create(manifest).returncode == 0
