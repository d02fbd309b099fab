"""Ways around the policy, tried through kube-apiserver with the real kubectl.

Each is what a tenant who can create pods in one opted-in namespace would try to
reach a GPU node, see its GPUs or borrow a priority: a node named by hand, a
toleration added to a pending pod (alone, or with the class label dropped in the
same update), a debug container, a class's PriorityClass on a CPU pod, a class pod
with zero GPUs, a GPU resource under another name. The
webhook configurations are the ones `install` renders, so the matchConditions
that decide what reaches the service are part of what is proven.

gpu-admission runs here with the live inventory of the cluster, as it does when
installed, so that it knows which nodes are GPU nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .controlplane import ControlPlane
from .nodes import nodes_in_pool
from .waiting import wait_for
from .webhook_server import WebhookServer

# Class pods are judged by validate.gpu-admission.io (their updates by validate-updates),
# pods without the label by validate-unclassed (webhook.install.configurations).
DENIED = re.compile(
    r'admission webhook "validate(-unclassed|-updates)?\.gpu-admission\.io" denied the request'
)
INVENTORY_TIMEOUT = 30.0
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"


@pytest.fixture(scope="module")
def live(controlplane: ControlPlane, admission: WebhookServer) -> Iterator[WebhookServer]:
    """gpu-admission on the default policy with the live inventory of this cluster."""
    with admission.serving(controlplane.kubeconfig, kubeconfig=controlplane.kubeconfig):
        yield admission


def pod_manifest(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    resources: dict[str, Any] | None = None,
    **spec: Any,
) -> str:
    container: dict[str, Any] = {"name": "main", "image": CUDA}
    if resources is not None:
        container["resources"] = resources
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [container], **spec},
        }
    )


def refusal(controlplane: ControlPlane, namespace: str, manifest: str) -> str:
    """kubectl's error for a pod kube-apiserver refused (fails the test if admitted)."""
    result = controlplane.apply(manifest, namespace=namespace, check=False)
    assert result.returncode != 0, f"admitted: {result.stdout}"
    return result.stderr


def test_a_cpu_pod_bound_by_name_to_a_gpu_node_is_refused(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    gpu_node = nodes_in_pool("training")[0]
    manifest = pod_manifest("pinned", nodeName=gpu_node)

    def refused() -> str | None:
        result = controlplane.apply(manifest, namespace=opted_in, dry_run="server", check=False)
        return result.stderr if "GPU pool training" in result.stderr else None

    message = wait_for(
        refused, INVENTORY_TIMEOUT, "the inventory to know the node", describe_last=live.log
    )

    assert DENIED.search(message)
    assert f"names node '{gpu_node}' in spec.nodeName, which bypasses the scheduler" in message
    cpu_node = nodes_in_pool(None)[0]
    controlplane.apply(pod_manifest("on-cpu", nodeName=cpu_node), namespace=opted_in)


def test_a_toleration_added_to_a_pending_pod_is_refused_and_other_updates_pass(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    """Created without a toleration the pod is none of our business and is admitted;
    the same pod created with the toleration would have been refused."""
    controlplane.apply(
        pod_manifest("waiting", nodeSelector={"gpu-pool": "training"}), namespace=opted_in
    )
    toleration = {"key": "gpu-pool", "operator": "Exists"}
    patch = [{"op": "add", "path": "/spec/tolerations/-", "value": toleration}]

    result = controlplane.kubectl(
        "patch",
        "pod",
        "waiting",
        "-n",
        opted_in,
        "--type=json",
        "-p",
        json.dumps(patch),
        check=False,
    )

    assert result.returncode != 0, result.stdout
    assert DENIED.search(result.stderr)
    assert "could be scheduled on GPU pool training (spec.tolerations[" in result.stderr
    assert (
        "{key: gpu-pool, operator: Exists} tolerates gpu-pool=training:NoSchedule" in result.stderr
    )
    pod = controlplane.get_json("pod", "waiting", opted_in)
    assert toleration not in pod["spec"]["tolerations"]
    controlplane.kubectl("label", "pod", "waiting", "-n", opted_in, "team=vision")
    controlplane.kubectl("annotate", "pod", "waiting", "-n", opted_in, "note=kept")


def test_a_class_label_dropped_with_a_toleration_added_in_one_update_is_refused(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    """The workload label decides which webhook sees a pod; an UPDATE that removes it
    while adding another pool's toleration is still judged, and refused for the class it
    drops: a pod is what it was admitted as."""
    controlplane.apply(
        pod_manifest("relabelled", labels={"gpu-admission.io/workload": "inference"}),
        namespace=opted_in,
    )
    toleration = {"key": "gpu-pool", "operator": "Equal", "value": "training"}
    patch = [
        {"op": "remove", "path": "/metadata/labels/gpu-admission.io~1workload"},
        {"op": "add", "path": "/spec/tolerations/-", "value": toleration},
    ]

    result = controlplane.kubectl(
        "patch",
        "pod",
        "relabelled",
        "-n",
        opted_in,
        "--type=json",
        "-p",
        json.dumps(patch),
        check=False,
    )

    assert result.returncode != 0, result.stdout
    assert DENIED.search(result.stderr), result.stderr
    assert "changes label 'gpu-admission.io/workload' from 'inference' to none" in result.stderr
    pod = controlplane.get_json("pod", "relabelled", opted_in)
    assert pod["metadata"]["labels"]["gpu-admission.io/workload"] == "inference"
    assert toleration not in pod["spec"]["tolerations"]


@pytest.fixture
def server(controlplane: ControlPlane, live: WebhookServer, opted_in: str) -> str:
    """An inference pod, admitted and mutated, for debug containers to be added to."""
    controlplane.apply(
        pod_manifest("server", labels={"gpu-admission.io/workload": "inference"}),
        namespace=opted_in,
    )
    return "server"


def test_a_debug_container_cannot_see_the_gpus_of_the_node(
    controlplane: ControlPlane, server: str, opted_in: str
) -> None:
    controlplane.kubectl(
        "debug", f"pod/{server}", "-n", opted_in, f"--image={CUDA}", "--container=debugger"
    )

    pod = controlplane.get_json("pod", server, opted_in)
    [debugger] = pod["spec"]["ephemeralContainers"]
    assert debugger["name"] == "debugger"
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in debugger["env"]


def test_a_debug_container_asking_for_every_gpu_is_refused(
    controlplane: ControlPlane, server: str, opted_in: str
) -> None:
    debugger = {
        "name": "debugger",
        "image": CUDA,
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
    }
    patch = {"spec": {"ephemeralContainers": [debugger]}}

    result = controlplane.kubectl(
        "patch",
        "pod",
        server,
        "-n",
        opted_in,
        "--subresource=ephemeralcontainers",
        "--type=strategic",
        "-p",
        json.dumps(patch),
        check=False,
    )

    assert result.returncode != 0, result.stdout
    assert "ephemeral container 'debugger' sets NVIDIA_VISIBLE_DEVICES=all" in result.stderr


def test_a_cpu_pod_cannot_borrow_a_class_priority(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    message = refusal(
        controlplane, opted_in, pod_manifest("borrower", priorityClassName="inference-priority")
    )

    assert DENIED.search(message)
    assert "uses priorityClassName 'inference-priority', which the policy reserves" in message


def test_a_class_pod_asking_for_zero_gpus_is_refused(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    zero = {"nvidia.com/gpu": "0", "cpu": "60"}
    manifest = pod_manifest(
        "cpu-hog",
        labels={"gpu-admission.io/workload": "inference"},
        resources={"limits": zero, "requests": zero},
    )

    message = refusal(controlplane, opted_in, manifest)

    assert DENIED.search(message)
    assert "inference pod requests no GPU" in message


def test_a_shared_gpu_without_a_class_is_refused(
    controlplane: ControlPlane, live: WebhookServer, opted_in: str
) -> None:
    shared = {"nvidia.com/gpu.shared": "1"}
    manifest = pod_manifest("sharing", resources={"limits": shared, "requests": shared})

    message = refusal(controlplane, opted_in, manifest)

    assert DENIED.search(message)
    assert "requests nvidia.com/gpu.shared but has no label gpu-admission.io/workload" in message
