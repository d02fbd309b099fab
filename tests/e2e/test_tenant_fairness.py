"""One tenant's burst fails no request of another's, tried as tenants with their own
tokens.

Every tenant reaches gpu-admission from kube-apiserver's one address, so the service
cannot tell one tenant's burst from another's requests; kube-apiserver can. With the
FlowSchema and PriorityLevelConfiguration that deploy/base/flowcontrol/flowcontrol.yaml ships,
kube-apiserver's API Priority and Fairness queues each namespace's pod writes as a flow
of its own, fairly, before any webhook is called: a tenant's six bursts of 200 dry-run
creations of a GPU pod queue behind each other, and a victim in another opted-in
namespace, creating as they go, sees every request answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .admission_fixtures import OPT_IN, REPO, class_pod
from .apiserver_metrics import scraped
from .burst import Creations, noisy_beside_victim
from .controlplane import ControlPlane
from .tenants import make_tenant
from .webhook_server import WebhookServer

FLOW_CONTROL = REPO / "deploy" / "base" / "flowcontrol" / "flowcontrol.yaml"
LEVEL = "gpu-admission-tenant-writes"
WORKLOAD = "gpu-admission.io/workload"
ROUNDS, BURST, VICTIM_CREATIONS = 6, 200, 69


@pytest.fixture
def flow_control(controlplane: ControlPlane) -> Iterator[None]:
    controlplane.apply(FLOW_CONTROL.read_text("utf-8"))
    try:
        yield
    finally:
        controlplane.kubectl("delete", "-f", str(FLOW_CONTROL), "--ignore-not-found")


@pytest.fixture
def victim_namespace(controlplane: ControlPlane, admission: WebhookServer) -> Iterator[str]:
    name = controlplane.create_namespace("fairness-victim", OPT_IN)
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


def gpu_pod(number: int) -> dict[str, Any]:
    return class_pod(f"burst-{number}", WORKLOAD)


def dispatched(controlplane: ControlPlane) -> float:
    """Requests kube-apiserver's fairness has let run at the tenants' level so far."""
    return sum(
        value
        for labels, value in scraped(controlplane).get(
            "apiserver_flowcontrol_dispatched_requests_total", []
        )
        if labels.get("priority_level") == LEVEL
    )


def test_one_tenants_bursts_fail_no_request_of_a_tenant_in_another_namespace(
    controlplane: ControlPlane,
    flow_control: None,
    opted_in: str,
    victim_namespace: str,
    tmp_path: Path,
) -> None:
    noisy = Creations(make_tenant(controlplane, opted_in, tmp_path), gpu_pod)
    victim = Creations(make_tenant(controlplane, victim_namespace, tmp_path), gpu_pod)
    before = dispatched(controlplane)

    async def run() -> None:
        try:
            await noisy_beside_victim(noisy, victim, ROUNDS, BURST, VICTIM_CREATIONS)
        finally:
            await noisy.close()
            await victim.close()

    asyncio.run(run())
    print(f"noisy: {noisy.outcomes}\nvictim: {victim.outcomes}")

    assert victim.outcomes.sent == VICTIM_CREATIONS
    assert victim.outcomes.failed == 0, victim.outcomes.failures
    assert not [f for f in noisy.outcomes.failures if "failed calling webhook" in f]
    assert noisy.outcomes.created > 0
    assert dispatched(controlplane) - before >= noisy.outcomes.created + victim.outcomes.created
