"""Decisions that follow the live nodes and PriorityClasses of the real control plane.

gpu-admission runs with ``--kubeconfig``, so it keeps a live inventory of the
cluster's Nodes and PriorityClasses; pods are sent through kube-apiserver with
``kubectl apply --dry-run=server`` (admission, webhooks included, without storing).

The policy is the default one with a ``lab`` pool and class added, so that the
test owns every node of that pool: the pool's static figure says 8 GPUs per
node, the nodes the test registers say otherwise.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from webhook.policy.load import default_policy_text

from .controlplane import ControlPlane
from .nodes import MODEL_LABEL, POOL_LABEL, NodeSpec, Taint, register_node
from .ports import free_ports
from .test_workloads import crd, custom_kind
from .waiting import wait_for
from .webhook_server import WebhookServer

FOLLOW_TIMEOUT = 20.0
"""How soon a change of a Node or PriorityClass must show in decisions."""

LAB_POOL = """\
  lab:
    gpusPerNode: 8
    models:
      A100: {product: A100-SXM4-80GB}
    mig: mixed
"""
LAB_CLASS = """\
  lab:
    pools: [lab]
    priorityClass: {name: lab-priority, value: 500}
    defaultGpus: 1
"""


def lab_priority_class(value: int) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "lab-priority"},
            "value": value,
            "description": "gpu-admission end-to-end tests, lab pool",
        }
    )


LAB_PRIORITY = lab_priority_class(777)
"""The lab class as the cluster has it: not the policy's value (500)."""


def lab_policy_text() -> str:
    text = default_policy_text()
    text = text.replace("\npools:\n", "\npools:\n" + LAB_POOL, 1)
    return text.replace("\nclasses:\n", "\nclasses:\n" + LAB_CLASS, 1)


def lab_node(name: str, **gpus: int) -> NodeSpec:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    capacity.update({f"nvidia.com/{resource}": str(n) for resource, n in gpus.items()})
    labels = {POOL_LABEL: "lab", MODEL_LABEL: "A100"}
    return NodeSpec(name, labels, capacity, taints=(Taint(POOL_LABEL, "lab"),))


def lab_pod(resource: str, amount: int) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "lab-job", "labels": {"gpu-admission.io/workload": "lab"}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/train:1",
                        "resources": {"limits": {resource: str(amount)}},
                    }
                ]
            },
        }
    )


def tried(
    controlplane: ControlPlane, namespace: str, resource: str, amount: int
) -> subprocess.CompletedProcess[str]:
    return controlplane.apply(
        lab_pod(resource, amount), namespace=namespace, dry_run="server", check=False
    )


def admitted(controlplane: ControlPlane, namespace: str, resource: str, amount: int) -> bool:
    return tried(controlplane, namespace, resource, amount).returncode == 0


def refused_with(
    controlplane: ControlPlane, namespace: str, resource: str, amount: int, message: str
) -> bool:
    result = tried(controlplane, namespace, resource, amount)
    return result.returncode != 0 and message in result.stderr


@pytest.fixture(scope="module")
def lab_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("lab-policy") / "lab.yaml"
    path.write_text(lab_policy_text(), "utf-8")
    return path


@pytest.fixture
def lab_nodes(controlplane: ControlPlane) -> Iterator[list[str]]:
    """Names of the lab nodes a test registers, deleted after it."""
    names: list[str] = []
    try:
        yield names
    finally:
        if names:
            controlplane.delete("node", names)


@pytest.fixture
def live(
    controlplane: ControlPlane, admission: WebhookServer, lab_policy: Path
) -> Iterator[WebhookServer]:
    """gpu-admission on the lab policy with the live inventory of this cluster."""
    with admission.serving(controlplane.kubeconfig, lab_policy, kubeconfig=controlplane.kubeconfig):
        yield admission


@pytest.fixture
def lab_priority(controlplane: ControlPlane) -> Iterator[None]:
    controlplane.apply(LAB_PRIORITY)
    try:
        yield
    finally:
        controlplane.delete("priorityclass", ["lab-priority"])


def test_oversize_and_mig_decisions_follow_the_live_nodes(
    controlplane: ControlPlane,
    live: WebhookServer,
    lab_priority: None,
    lab_nodes: list[str],
    opted_in: str,
) -> None:
    gpu, slices = "nvidia.com/gpu", "nvidia.com/mig-2g.20gb"

    def follows(what: str, check: Callable[[], bool]) -> None:
        wait_for(check, FOLLOW_TIMEOUT, what, describe_last=live.log)

    # No lab node yet: the pool is unknown, so the policy's 8 GPUs per node hold.
    follows(
        "8 GPUs admitted on the static figures", lambda: admitted(controlplane, opted_in, gpu, 8)
    )

    register_node(controlplane, lab_node("lab-a-0", gpu=4, **{"mig-1g.10gb": 7}))
    lab_nodes.append("lab-a-0")
    follows(
        "8 GPUs refused by the only lab node, with its name",
        lambda: refused_with(
            controlplane,
            opted_in,
            gpu,
            8,
            "pod requests 8 nvidia.com/gpu; the largest node in pool lab has 4 allocatable "
            "now (node lab-a-0)",
        ),
    )
    assert admitted(controlplane, opted_in, gpu, 4)
    assert refused_with(
        controlplane,
        opted_in,
        slices,
        1,
        "MIG profile 2g.20gb is not offered now by any schedulable node of pool lab; "
        "offered now: 1g.10gb",
    )

    register_node(controlplane, lab_node("lab-b-0", gpu=8, **{"mig-2g.20gb": 3}))
    lab_nodes.append("lab-b-0")
    follows(
        "8 GPUs admitted once an 8-GPU node joins", lambda: admitted(controlplane, opted_in, gpu, 8)
    )
    assert admitted(controlplane, opted_in, slices, 3)

    controlplane.kubectl("cordon", "lab-b-0")
    follows(
        "8 GPUs refused while the 8-GPU node is cordoned",
        lambda: refused_with(controlplane, opted_in, gpu, 8, "has 4 allocatable now"),
    )
    controlplane.kubectl("uncordon", "lab-b-0")
    follows("8 GPUs admitted once uncordoned", lambda: admitted(controlplane, opted_in, gpu, 8))

    controlplane.kubectl("label", "node", "lab-b-0", f"{POOL_LABEL}=elsewhere", "--overwrite")
    follows(
        "8 GPUs refused once the 8-GPU node leaves the pool by its label",
        lambda: refused_with(controlplane, opted_in, gpu, 8, "has 4 allocatable now"),
    )
    controlplane.kubectl("label", "node", "lab-b-0", f"{POOL_LABEL}=lab", "--overwrite")
    follows("8 GPUs admitted once relabelled", lambda: admitted(controlplane, opted_in, gpu, 8))

    controlplane.delete("node", ["lab-b-0"])
    lab_nodes.remove("lab-b-0")
    follows(
        "8 GPUs refused once the 8-GPU node is deleted",
        lambda: refused_with(controlplane, opted_in, gpu, 8, "(node lab-a-0)"),
    )


def test_a_pod_too_large_for_the_event_loop_is_judged_in_the_worker_with_the_live_nodes(
    controlplane: ControlPlane,
    live: WebhookServer,
    lab_priority: None,
    lab_nodes: list[str],
    opted_in: str,
) -> None:
    """A review over 32 KiB is judged in the review worker's process, which gets the live
    inventory's snapshot with it."""
    register_node(controlplane, lab_node("lab-large-0", gpu=4))
    lab_nodes.append("lab-large-0")
    large = yaml.safe_load(lab_pod("nvidia.com/gpu", 8))
    large["spec"]["containers"][0]["env"] = [{"name": "NOTES", "value": "x" * 48 * 1024}]

    def refused_by_the_live_node() -> bool:
        result = controlplane.apply(
            yaml.safe_dump(large), namespace=opted_in, dry_run="server", check=False
        )
        return result.returncode != 0 and "has 4 allocatable now (node lab-large-0)" in (
            result.stderr
        )

    wait_for(
        refused_by_the_live_node,
        FOLLOW_TIMEOUT,
        "8 GPUs refused by the live node",
        describe_last=live.log,
    )


def test_a_missing_priority_class_is_refused_clearly_and_its_real_value_used_once_created(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    wait_for(
        lambda: refused_with(
            controlplane,
            opted_in,
            "nvidia.com/gpu",
            1,
            "the policy runs lab pods at PriorityClass 'lab-priority', which does not exist "
            "in this cluster",
        ),
        FOLLOW_TIMEOUT,
        "a denial naming the missing PriorityClass",
        describe_last=live.log,
    )
    checks = live.readiness()["checks"]
    assert checks["inventory"]["ok"] is True
    assert (
        "the cluster lacks (their pods are refused): lab-priority"
        in (checks["inventory"]["detail"])
    )

    controlplane.apply(LAB_PRIORITY)
    try:

        def created_priority() -> int | None:
            result = controlplane.kubectl(
                "apply",
                "--namespace",
                opted_in,
                "--dry-run=server",
                "--output=json",
                "-f",
                "-",
                input=lab_pod("nvidia.com/gpu", 1),
                check=False,
            )
            if result.returncode != 0:
                return None
            priority: int = json.loads(result.stdout)["spec"]["priority"]
            return priority

        priority = wait_for(
            created_priority, FOLLOW_TIMEOUT, "the pod admitted once the class exists"
        )
        assert priority == 777  # the cluster's value, not the policy's 500
    finally:
        controlplane.delete("priorityclass", ["lab-priority"])


def test_until_the_inventory_syncs_the_replica_is_unready_and_judges_by_static_figures(
    controlplane: ControlPlane,
    admission: WebhookServer,
    lab_policy: Path,
    lab_nodes: list[str],
    opted_in: str,
    tmp_path: Path,
) -> None:
    register_node(controlplane, lab_node("lab-c-0", gpu=4))
    lab_nodes.append("lab-c-0")
    # Unseen, the policy's value is injected; kube-apiserver's Priority plugin refuses a
    # value that is not the class's, so here the cluster's class has the policy's value.
    controlplane.apply(lab_priority_class(500))
    # The service's own kubeconfig points at a port nothing listens on: it never syncs,
    # while kube-apiserver still calls it for every pod.
    unreachable = tmp_path / "unreachable.kubeconfig"
    config = yaml.safe_load(controlplane.kubeconfig.read_text("utf-8"))
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{free_ports(1)[0]}"
    unreachable.write_text(yaml.safe_dump(config), "utf-8")
    try:
        with admission.serving(controlplane.kubeconfig, lab_policy, kubeconfig=unreachable):
            # lab-c-0 has 4 GPUs, but unseen: the policy's 8 per node hold.
            assert admitted(controlplane, opted_in, "nvidia.com/gpu", 8)
            checks = admission.readiness()["checks"]
            assert checks["inventory"]["ok"] is False  # a Service's endpoints leave it out
            detail = checks["inventory"]["detail"]
            assert detail.startswith("unready until the inventory has listed each kind once")
            assert "nodes: not synced yet, the policy's static node figures apply" in detail
            assert "last error:" in detail
    finally:
        controlplane.delete("priorityclass", ["lab-priority"])


def lab_deployment(gpus_per_replica: int) -> str:
    labels = {"app": "lab-serve", "gpu-admission.io/workload": "lab"}
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "lab-serve"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "lab-serve"}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [
                            {
                                "name": "server",
                                "image": "registry.example/serve:1",
                                "resources": {"limits": {"nvidia.com/gpu": str(gpus_per_replica)}},
                            }
                        ]
                    },
                },
            },
        }
    )


def horizontal_pod_autoscaler(max_replicas: int) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "lab-serve"},
            "spec": {
                "scaleTargetRef": {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "lab-serve",
                },
                "minReplicas": 1,
                "maxReplicas": max_replicas,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    }
                ],
            },
        }
    )


def scaled_object(max_replicas: int) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": {"name": "lab-serve"},
            "spec": {
                "scaleTargetRef": {"name": "lab-serve"},
                "maxReplicaCount": max_replicas,
                "triggers": [
                    {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "80"}}
                ],
            },
        }
    )


def test_autoscalers_that_can_outgrow_the_pool_get_a_warning_printed_by_kubectl(
    controlplane: ControlPlane,
    live: WebhookServer,
    lab_priority: None,
    lab_nodes: list[str],
    opted_in: str,
) -> None:
    register_node(controlplane, lab_node("lab-d-0", gpu=4))
    lab_nodes.append("lab-d-0")
    wait_for(
        lambda: refused_with(controlplane, opted_in, "nvidia.com/gpu", 8, "(node lab-d-0)"),
        FOLLOW_TIMEOUT,
        "the lab node in the inventory",
        describe_last=live.log,
    )
    controlplane.apply(lab_deployment(gpus_per_replica=2), namespace=opted_in)

    over = controlplane.apply(horizontal_pod_autoscaler(10), namespace=opted_in)
    within = controlplane.apply(horizontal_pod_autoscaler(2), namespace=opted_in)

    assert "created" in over.stdout
    assert (
        "Warning: gpu-admission: HorizontalPodAutoscaler lab-serve can scale "
        "Deployment lab-serve to 10 replicas of 2 nvidia.com/gpu (20); pool lab has 4 "
        "allocatable now, so replicas beyond 2 could never schedule"
    ) in over.stderr, over.stderr
    assert "configured" in within.stdout
    assert "Warning" not in within.stderr, within.stderr

    with custom_kind(controlplane, crd("keda.sh", "ScaledObject", "v1alpha1")):
        keda = controlplane.apply(scaled_object(5), namespace=opted_in)
        assert "created" in keda.stdout
        assert (
            "Warning: gpu-admission: ScaledObject lab-serve can scale Deployment "
            "lab-serve to 5 replicas of 2 nvidia.com/gpu (10)"
        ) in keda.stderr, keda.stderr
