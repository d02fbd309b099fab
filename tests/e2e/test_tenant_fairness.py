"""One tenant's burst fails no request of another's, tried as tenants with their own
tokens.

Every tenant reaches gpu-admission from kube-apiserver's one address, so the service
cannot tell one tenant's burst from another's requests; kube-apiserver can. With the
FlowSchema and PriorityLevelConfiguration that deploy/base/flowcontrol/flowcontrol.yaml
ships (every tenant write a webhook is sent, written from the policy), kube-apiserver's
API Priority and Fairness queues each namespace's writes as a flow of its own, fairly,
before any webhook is called: a tenant's six bursts of 200 dry-run creations of a GPU
pod, or of a GPU Job (two webhooks each), queue behind each other, and a victim in
another opted-in namespace, creating GPU pods as they go, sees every request answered.

The service runs as installed, with a client of the cluster and told kube-apiserver's
address (the chart's `networkPolicy.webhookSources`; this kube-apiserver serves on
loopback, where the `kubernetes` EndpointSlice it would be learned from is not kept). It
never paces or cuts that address's connections, so no connection is cut for rate (its
own metric says so).

Each test runs once in `make test`; `make e2e-fairness` runs each ten times in a row
(``GPU_ADMISSION_FAIRNESS_RUNS``).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .admission_fixtures import OPT_IN, REPO, class_pod
from .apiserver_metrics import LABEL, SAMPLE, scraped
from .burst import JOBS, Creations, noisy_beside_victim
from .controlplane import ControlPlane
from .ports import free_ports
from .tenants import make_tenant
from .webhook_server import WebhookServer

FLOW_CONTROL = REPO / "deploy" / "base" / "flowcontrol" / "flowcontrol.yaml"
LEVEL = "gpu-admission-tenant-writes"
WORKLOAD = "gpu-admission.io/workload"
ROUNDS, BURST, VICTIM_CREATIONS = 6, 200, 69
RUNS = range(1, int(os.environ.get("GPU_ADMISSION_FAIRNESS_RUNS", "1")) + 1)


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_ports(1)[0]


@pytest.fixture(scope="module")
def installed(
    controlplane: ControlPlane, admission: WebhookServer, metrics_port: int
) -> Iterator[WebhookServer]:
    """gpu-admission with a client of the cluster, as installed, and the shipped flow
    control objects."""
    controlplane.apply(FLOW_CONTROL.read_text("utf-8"))
    try:
        with admission.serving(
            controlplane.kubeconfig,
            kubeconfig=controlplane.kubeconfig,
            metrics_port=metrics_port,
            apiserver_sources=["127.0.0.1"],
        ):
            yield admission
    finally:
        controlplane.kubectl("delete", "-f", str(FLOW_CONTROL), "--ignore-not-found")


@pytest.fixture
def victim_namespace(controlplane: ControlPlane, installed: WebhookServer) -> Iterator[str]:
    name = controlplane.create_namespace("fairness-victim", OPT_IN)
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


def gpu_pod(number: int) -> dict[str, Any]:
    return class_pod(f"burst-{number}", WORKLOAD)


def gpu_job(number: int) -> dict[str, Any]:
    template = class_pod("worker", WORKLOAD)
    template["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"burst-{number}"},
        "spec": {"template": {"metadata": template["metadata"], "spec": template["spec"]}},
    }


def dispatched(controlplane: ControlPlane) -> float:
    """Requests kube-apiserver's fairness has let run at the tenants' level so far."""
    return sum(
        value
        for labels, value in scraped(controlplane).get(
            "apiserver_flowcontrol_dispatched_requests_total", []
        )
        if labels.get("priority_level") == LEVEL
    )


def cut_for_rate(metrics_port: int) -> float:
    """Connections the service cut for their source's rate so far."""
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
    samples = [SAMPLE.match(line) for line in text.splitlines()]
    return sum(
        float(sample["value"])
        for sample in samples
        if sample is not None
        and sample["name"] == "gpu_admission_connections_cut_total"
        and dict(LABEL.findall(sample["labels"] or "")).get("reason") == "source_rate"
    )


@pytest.mark.parametrize("run", RUNS, ids=lambda run: f"run-{run}")
@pytest.mark.parametrize("kind", ["pods", "jobs"])
def test_one_tenants_bursts_fail_no_gpu_pod_creation_of_a_tenant_in_another_namespace(
    controlplane: ControlPlane,
    installed: WebhookServer,
    metrics_port: int,
    opted_in: str,
    victim_namespace: str,
    tmp_path: Path,
    kind: str,
    run: int,
) -> None:
    tenant = make_tenant(controlplane, opted_in, tmp_path)
    noisy = (
        Creations(tenant, gpu_pod) if kind == "pods" else Creations(tenant, gpu_job, JOBS, "jobs")
    )
    victim = Creations(make_tenant(controlplane, victim_namespace, tmp_path), gpu_pod)
    before, cut_before = dispatched(controlplane), cut_for_rate(metrics_port)

    async def burst() -> None:
        try:
            await noisy_beside_victim(noisy, victim, ROUNDS, BURST, VICTIM_CREATIONS)
        finally:
            await noisy.close()
            await victim.close()

    asyncio.run(burst())
    print(f"run {run}, {kind}: noisy {noisy.outcomes}\nvictim: {victim.outcomes}")

    assert victim.outcomes.sent == VICTIM_CREATIONS
    assert victim.outcomes.failed == 0, victim.outcomes.failures
    assert not [f for f in noisy.outcomes.failures if "failed calling webhook" in f]
    assert noisy.outcomes.created > 0
    assert dispatched(controlplane) - before >= noisy.outcomes.created + victim.outcomes.created
    assert cut_for_rate(metrics_port) == cut_before
