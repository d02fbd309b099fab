"""A tenant of one namespace, as a platform team makes one: a ServiceAccount of the
namespace bound to a Role that creates pods, adds debug containers and writes
ConfigMaps, Secrets, Jobs and CronJobs there and nothing else, using its own token (the TokenRequest API) with the
real kubectl. What it is refused, kube-apiserver refused for it; what it is let do, no
administrator did for it."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .controlplane import ControlPlane
from .kubeconfig import write_token_kubeconfig

ROLE_RULES = [
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["pods/ephemeralcontainers"],
        "verbs": ["get", "update", "patch"],
    },
    {
        "apiGroups": [""],
        "resources": ["configmaps", "secrets"],
        "verbs": ["get", "list", "create", "update", "delete"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs", "cronjobs"],
        "verbs": ["get", "list", "create", "update", "patch", "delete"],
    },
]


@dataclass(frozen=True)
class Tenant:
    controlplane: ControlPlane
    namespace: str
    kubeconfig: Path
    token: str

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as the tenant, in its namespace."""
        command = [
            str(self.controlplane.kubectl_binary),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.kubeconfig.parent / 'kubectl-cache'}",
            f"--namespace={self.namespace}",
            *args,
        ]
        result = subprocess.run(command, input=input, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} as the tenant failed: {result.stderr}")
        return result

    def create(
        self, manifest: dict[str, Any], check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.kubectl("create", "-f", "-", input=json.dumps(manifest), check=check)


def make_tenant(controlplane: ControlPlane, namespace: str, directory: Path) -> Tenant:
    """The ServiceAccount `tenant` of `namespace`, its Role and RoleBinding, and a
    kubeconfig holding a token of its own (valid an hour)."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant"}}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "tenant"},
        "rules": ROLE_RULES,
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "tenant"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
        "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
    }
    listed = {"apiVersion": "v1", "kind": "List", "items": [account, role, binding]}
    controlplane.apply(json.dumps(listed), namespace=namespace)
    token = controlplane.kubectl(
        "create", "token", "tenant", "--namespace", namespace, "--duration=1h"
    ).stdout.strip()
    kubeconfig = write_token_kubeconfig(
        directory / f"tenant-{namespace}.kubeconfig",
        server=controlplane.api_url,
        ca_cert=controlplane.ca_path,
        token=token,
        user=f"system:serviceaccount:{namespace}:tenant",
    )
    return Tenant(controlplane, namespace, kubeconfig, token)
