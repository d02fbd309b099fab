"""Hostile round 4, host access: a tenant of an opted-in namespace, with its own token,
asks a GPU node for what Pod Security `baseline` would forbid and the namespace does not
enforce (an opted-in namespace may not): folders of the node no rule named before, and
its network, processes and IPC. The default policy allows none of it (rule host-access);
a pod kept off GPU nodes is left alone, so what fails closed is GPU work alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .admission_fixtures import class_pod
from .controlplane import ControlPlane
from .tenants import Tenant, make_tenant
from .test_hostile_tenant import DENIED_BY, WORKLOAD, with_volume
from .webhook_server import WebhookServer


@pytest.fixture
def tenant(
    controlplane: ControlPlane, admission: WebhookServer, opted_in: str, tmp_path: Path
) -> Tenant:
    return make_tenant(controlplane, opted_in, tmp_path)


def cpu_pod(name: str, **spec: object) -> dict[str, object]:
    """A pod of no class asking for no GPU, with `spec` besides its container."""
    containers = [{"name": "c", "image": "registry.example/tool:1"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {**spec, "containers": containers},
    }


def stored(tenant: Tenant, name: str) -> bool:
    found = tenant.kubectl("get", "pod", name, "--ignore-not-found", "-o", "name")
    return bool(found.stdout.strip())


@pytest.mark.parametrize(
    "host_path",
    [
        "/sys/bus/pci",  # reset, rebind or read the GPUs' PCI functions
        "/usr/local/nvidia",  # the toolkit's binaries, run as root in every container
        "/run/dbus",  # the system bus's socket
        "/var/lib/kubelet/pki",  # the kubelet's credentials
    ],
)
def test_a_folder_of_the_node_the_policy_does_not_allow_is_refused(
    tenant: Tenant, host_path: str
) -> None:
    manifest = with_volume("host-folder", host_path, "/host")
    manifest["spec"]["containers"][1]["volumeMounts"][0]["readOnly"] = True

    result = tenant.create(manifest, check=False)

    assert result.returncode != 0, result.stdout
    assert DENIED_BY in result.stderr
    assert f"hostPath volume 'host' mounts '{host_path}' of the node" in result.stderr
    assert "the policy's hostAccess does not allow" not in result.stderr  # a class pod's
    assert "hostAccess of the policy and of class 'inference' does not allow" in result.stderr
    assert not stored(tenant, "host-folder")


@pytest.mark.parametrize("field", ["hostPID", "hostIPC", "hostNetwork"])
def test_a_class_pod_may_not_share_the_nodes_processes_ipc_or_network(
    tenant: Tenant, field: str
) -> None:
    manifest = class_pod("host-namespace", WORKLOAD)
    manifest["spec"][field] = True

    result = tenant.create(manifest, check=False)

    assert result.returncode != 0, result.stdout
    assert DENIED_BY in result.stderr
    assert f"pod sets {field}: true" in result.stderr
    assert not stored(tenant, "host-namespace")


def test_a_pod_of_no_class_tolerating_every_taint_may_not_either(tenant: Tenant) -> None:
    """It may land on a GPU node: it is judged as GPU work."""
    manifest = cpu_pod("anywhere", hostPID=True, tolerations=[{"operator": "Exists"}])

    result = tenant.create(manifest, check=False)

    assert result.returncode != 0, result.stdout
    assert "pod sets hostPID: true" in result.stderr


def test_a_cpu_pod_kept_off_gpu_nodes_keeps_its_host_network(tenant: Tenant) -> None:
    """What fails closed is GPU work alone: Pod Security is the namespace's own choice."""
    assert tenant.create(cpu_pod("cpu-agent", hostNetwork=True)).returncode == 0
    assert json.loads(tenant.kubectl("get", "pod", "cpu-agent", "-o", "json").stdout)["spec"][
        "hostNetwork"
    ]
