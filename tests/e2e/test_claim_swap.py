"""A class pod cannot end up holding no GPU by having its claim made again, end to end.

A tenant limited by RBAC to one opted-in namespace (pods, and ResourceClaims: create,
get, delete) creates a shared ResourceClaim of one GPU and a gated inference pod using
it, both admitted. Then it deletes the claim, creates it again under its name asking for
nothing, and lifts the gate. The real kube-scheduler allocates the empty claim and
reserves it for the pod before binding it; the reservation goes through gpu-admission
(``webhook.engine.handlers.reservations``), which reads the pod and judges it with the
claim as allocated and refuses it, so the pod is never bound at its class's priority
without a GPU, and the scheduler says why in its event. The same pod whose claim was
left alone is bound as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from . import dra
from .controlplane import ControlPlane
from .test_dra_placement import WORKLOAD, mixed_cluster

__all__ = ["mixed_cluster"]  # the fixture, used below by name

TENANT = ("--as=tenant", "--as-group=team-a")
GATE = "example.com/hold"


def tenant_role(namespace: str) -> str:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "tenant", "namespace": namespace},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods"],
                "verbs": ["get", "list", "create", "update", "patch"],
            },
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims"],
                "verbs": ["get", "list", "create", "delete"],
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "tenant", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tenant"}],
    }
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]})


def shared_claim(gpus: int) -> dict[str, Any]:
    requests = [
        {"name": "gpu", "exactly": {"deviceClassName": dra.GPU_CLASS, "count": gpus}}
        for _ in range(1 if gpus else 0)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu"},
        "spec": {"devices": {"requests": requests}},
    }


def gated_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {WORKLOAD: "inference"}},
        "spec": {
            "schedulingGates": [{"name": GATE}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared-gpu"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/app:1",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def as_tenant(controlplane: ControlPlane, namespace: str, *args: str, input: str = "") -> None:
    controlplane.kubectl(*args, "-n", namespace, *TENANT, input=input or None)


def lift_gate(controlplane: ControlPlane, namespace: str, name: str) -> None:
    patch = json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}])
    as_tenant(controlplane, namespace, "patch", "pod", name, "--type=json", "-p", patch)


@pytest.fixture
def tenant_namespace(controlplane: ControlPlane, opted_in: str) -> str:
    controlplane.apply(tenant_role(opted_in))
    return opted_in


@pytest.mark.usefixtures("mixed_cluster")
class TestAClaimMadeAgainAfterThePodsCreate:
    def test_the_reservation_is_refused_and_the_pod_waits_unbound_saying_why(
        self, controlplane: ControlPlane, tenant_namespace: str
    ) -> None:
        namespace = tenant_namespace
        as_tenant(controlplane, namespace, "create", "-f", "-", input=json.dumps(shared_claim(1)))
        as_tenant(controlplane, namespace, "create", "-f", "-", input=json.dumps(gated_pod("swap")))

        as_tenant(controlplane, namespace, "delete", "resourceclaim", "shared-gpu", "--wait")
        as_tenant(controlplane, namespace, "create", "-f", "-", input=json.dumps(shared_claim(0)))
        lift_gate(controlplane, namespace, "swap")

        event = controlplane.wait_for_event(namespace, "swap", "FailedScheduling", timeout=60)
        controlplane.wait_for(
            lambda: any(
                "denied reservation of claim" in e.get("message", "")
                for e in controlplane.events_for(namespace, "swap")
            ),
            60,
            "the scheduler's event of the refused reservation",
        )
        messages = " | ".join(
            e.get("message", "") for e in controlplane.events_for(namespace, "swap")
        )
        assert "validate-reservations.gpu-admission.io" in messages, event
        assert "inference pod requests no GPU" in messages
        assert not controlplane.get_json("pod", "swap", namespace)["spec"].get("nodeName")

    def test_the_same_pod_whose_claim_was_left_alone_is_bound(
        self, controlplane: ControlPlane, tenant_namespace: str
    ) -> None:
        namespace = tenant_namespace
        as_tenant(controlplane, namespace, "create", "-f", "-", input=json.dumps(shared_claim(1)))
        as_tenant(controlplane, namespace, "create", "-f", "-", input=json.dumps(gated_pod("kept")))

        lift_gate(controlplane, namespace, "kept")

        assert controlplane.wait_for_binding(namespace, "kept", timeout=60)
