"""No way to a GPU node's devices but through the scheduler, tried with the real kubectl.

The cluster is labelled as real clusters are, not as the policy expects: besides the
session's fleet it holds a training node labelled only by GPU Feature Discovery (no
``nvidia-gpu-model``), a training node of a model the policy does not list (H100) and a
node of a pool the policy does not name (``gpu-pool=research``, tainted for it), each
with eight ``nvidia.com/gpu``; the fleet's CPU nodes are the ordinary ones.

In a namespace that opted in, ``kubectl apply`` is refused for each way a tenant could
reach those nodes or the devices of any GPU node around the scheduler, and the
service's log of the denial names the rule that refused it:

- the issue's pod of no class that tolerates the pool taints and asks for the nodes the
  policy does not describe (no model label, an unlisted model, an unnamed pool), which
  the scheduler, where nothing judges it, binds to exactly such a node;
- a training pod tolerating every taint, and training pods otherwise bound only to
  training nodes, never to the research node whose GPUs stay free;
- CDI annotations, device-list mounts and hostPaths of device nodes, privileged
  containers and CAP_SYS_ADMIN, device-request variables set, taken with an ``envFrom``
  prefix or written as keys of ConfigMaps and Secrets (whose values are never echoed);
- GPUs asked as a DeviceClass's extended resource on device-plugin pools, or without a
  class, and never topped up by the mutation with ``nvidia.com/gpu``.

gpu-admission runs with the live inventory of the cluster, as when installed.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.policy.load import default_policy_text

from .admission_fixtures import OPT_IN
from .controlplane import ControlPlane
from .nodes import (
    MODEL_LABEL,
    POOL_LABEL,
    PRODUCT_LABEL,
    ZONE_LABEL,
    NodeSpec,
    Taint,
    nodes_in_pool,
    register_node,
)
from .waiting import wait_for
from .webhook_server import WebhookServer

DENIED = re.compile(
    r'admission webhook "validate(-unclassed|-env-keys)?\.gpu-admission\.io" denied the request'
)
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"
WORKLOAD = "gpu-admission.io/workload"
TRAINING = {WORKLOAD: "training"}
DRA_GPU = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"
SECRET_VALUE = "all-secret-value-123"

GFD_ONLY = "training-gfd-a100-0"
H100 = "training-h100-0"
RESEARCH = "research-a100-0"
HOST = {"cpu": "128", "memory": "1031400Mi", "pods": "110", "ephemeral-storage": "15Ti"}
HOST_ALLOCATABLE = {"cpu": "126", "memory": "1015016Mi"}


def gpu_node(name: str, pool: str, labels: dict[str, str]) -> NodeSpec:
    """A node of eight GPUs through the device plugin, tainted for its pool."""
    return NodeSpec(
        name,
        {POOL_LABEL: pool, ZONE_LABEL: "zone-a", "nvidia.com/gpu.count": "8", **labels},
        {**HOST, "nvidia.com/gpu": "8"},
        HOST_ALLOCATABLE,
        (Taint(POOL_LABEL, pool),),
    )


ODD_NODES = (
    # GPU Feature Discovery's labels only: nobody added the policy's model label.
    gpu_node(
        GFD_ONLY,
        "training",
        {"nvidia.com/gpu.present": "true", PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"},
    ),
    gpu_node(H100, "training", {MODEL_LABEL: "H100", PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}),
    gpu_node(RESEARCH, "research", {MODEL_LABEL: "A100", PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"}),
)
TRAINING_NODES = (*nodes_in_pool("training"), GFD_ONLY, H100)


# -- the cluster, the service and the namespaces ------------------------------------------


@pytest.fixture(scope="module")
def odd_nodes(controlplane: ControlPlane) -> Iterator[list[str]]:
    """The nodes labelled as real clusters label them; deleted afterwards."""
    names = [node.name for node in ODD_NODES]
    try:
        for node in ODD_NODES:
            register_node(controlplane, node)
        yield names
    finally:
        controlplane.delete("node", names)


@pytest.fixture(scope="module")
def live(
    controlplane: ControlPlane, admission: WebhookServer, odd_nodes: list[str]
) -> Iterator[WebhookServer]:
    """gpu-admission on the default policy with the live inventory of this cluster."""
    with admission.serving(controlplane.kubeconfig, kubeconfig=controlplane.kubeconfig):
        yield admission


@pytest.fixture(scope="module")
def tenant(controlplane: ControlPlane, live: WebhookServer) -> Iterator[str]:
    """One namespace that opted in, for the module: refused objects leave nothing in it."""
    name = controlplane.create_namespace("runtime-isolation", OPT_IN)
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


@pytest.fixture(scope="module")
def unjudged(controlplane: ControlPlane, live: WebhookServer) -> Iterator[str]:
    """A namespace that did not opt in: what the scheduler does with a pod nobody judged."""
    name = controlplane.create_namespace("runtime-isolation-unjudged")
    try:
        yield name
    finally:
        controlplane.delete_namespace(name)


# -- manifests ----------------------------------------------------------------------------


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    container: dict[str, Any] | None = None,
    **spec: Any,
) -> str:
    metadata: dict[str, Any] = {"name": name, "labels": labels or {}}
    if annotations:
        metadata["annotations"] = annotations
    main = {"name": "main", "image": CUDA, **(container or {})}
    document = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}
    return yaml.safe_dump({**document, "spec": {"containers": [main], **spec}})


def required(*expressions: dict[str, Any]) -> dict[str, Any]:
    """A required node affinity of one term."""
    terms = {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}


def gpus(count: int, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"resources": {"limits": {resource: str(count)}}}


# -- what a refusal looks like ------------------------------------------------------------


def denied_rules(server: WebhookServer, namespace: str, name: str) -> list[str] | None:
    """The rules the service's log line of the latest denial of ``namespace/name`` names."""
    wanted = {"message": "denied", "namespace": namespace, "object": name}
    for line in reversed(server.log().splitlines()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and all(entry.get(k) == v for k, v in wanted.items()):
            rules: list[str] = entry.get("rules", [])
            return rules
    return None


def refused(
    controlplane: ControlPlane, server: WebhookServer, namespace: str, manifest: str, rule: str
) -> str:
    """Apply ``manifest`` as a user would; assert that kube-apiserver refused it through
    gpu-admission for ``rule``, and return kubectl's error."""
    result = controlplane.apply(manifest, namespace=namespace, check=False)
    if result.returncode == 0:
        # Gone at once, so that what it holds cannot change what the next tests see.
        controlplane.kubectl(
            *("delete", "--namespace", namespace, "--force", "--grace-period=0", "-f", "-"),
            input=manifest,
        )
        pytest.fail(f"admitted ({result.stdout.strip()}), not refused for {rule}")
    assert DENIED.search(result.stderr), result.stderr
    name = yaml.safe_load(manifest)["metadata"]["name"]
    rules = wait_for(
        lambda: denied_rules(server, namespace, name),
        10,
        f"the service's log of the denial of {name}",
        describe_last=server.log,
    )
    assert rule in rules, f"refused for {rules}, not {rule}: {result.stderr}"
    return result.stderr


# -- placement: nodes the policy does not describe ----------------------------------------

TOLERATE_POOLS = [{"key": POOL_LABEL, "operator": "Exists"}]
IN_A_POOL = {"key": POOL_LABEL, "operator": "Exists"}

ISSUE_PODS = {
    # (tolerations, required affinity, the node it reaches, what the refusal says it reaches)
    "no-model-label": (
        TOLERATE_POOLS,
        required(IN_A_POOL, {"key": MODEL_LABEL, "operator": "DoesNotExist"}),
        GFD_ONLY,
        "on its nodes without label nvidia-gpu-model",
    ),
    "unlisted-model": (
        TOLERATE_POOLS,
        required(IN_A_POOL, {"key": MODEL_LABEL, "operator": "In", "values": ["H100"]}),
        H100,
        "on its nodes of a GPU model it does not list",
    ),
    "unnamed-pool": (
        [{"key": POOL_LABEL, "operator": "Equal", "value": "research"}],
        required({"key": POOL_LABEL, "operator": "In", "values": ["research"]}),
        RESEARCH,
        "a GPU node of a pool the policy does not name",
    ),
}


@pytest.mark.parametrize("shape", ISSUE_PODS)
def test_a_pod_of_no_class_aiming_at_a_node_the_policy_does_not_describe_is_refused(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, unjudged: str, shape: str
) -> None:
    """Where nothing judges it, the scheduler binds the same pod to that GPU node."""
    tolerations, affinity, node, reached = ISSUE_PODS[shape]
    manifest = pod(f"issue-{shape}", tolerations=tolerations, affinity=affinity)

    message = refused(controlplane, live, tenant, manifest, "non-gpu-placement")

    assert "pod requests no GPU but could be scheduled on" in message
    assert reached in message
    controlplane.apply(manifest, namespace=unjudged)
    assert controlplane.wait_for_binding(unjudged, f"issue-{shape}") == node


def test_a_training_pod_tolerating_every_taint_is_kept_to_training_nodes_by_its_mutation(
    controlplane: ControlPlane, live: WebhookServer, tenant: str
) -> None:
    """Its own `NotIn [inference]` would let it onto the research node; the mutation adds
    `In [training]` to its term, and the pod is judged (and scheduled) as mutated."""
    manifest = pod(
        "everywhere",
        labels=TRAINING,
        tolerations=[{"operator": "Exists"}],
        affinity=required({"key": POOL_LABEL, "operator": "NotIn", "values": ["inference"]}),
    )
    result = controlplane.kubectl(
        *("apply", "--namespace", tenant, "--dry-run=server", "--output=json", "-f", "-"),
        input=manifest,
    )

    assert result.returncode == 0, result.stderr
    created = json.loads(result.stdout)
    terms = created["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    for term in terms:
        assert {"key": POOL_LABEL, "operator": "In", "values": ["training"]} in (
            term["matchExpressions"]
        )


def test_training_pods_are_bound_to_training_nodes_only(
    controlplane: ControlPlane, live: WebhookServer, tenant: str
) -> None:
    """One pod of eight GPUs more than the training nodes hold: it waits, while the
    research node's eight GPUs stay free."""
    pods = [
        pod(f"train-{i}", labels={**TRAINING, "run": "fill"}, container=gpus(8))
        for i in range(len(TRAINING_NODES) + 1)
    ]
    try:
        controlplane.apply("---\n".join(pods), namespace=tenant)

        def bound() -> tuple[list[str], list[str]] | None:
            found = controlplane.list_json("pods", tenant, "run=fill")
            nodes = [p["spec"]["nodeName"] for p in found if p["spec"].get("nodeName")]
            waiting = [p["metadata"]["name"] for p in found if not p["spec"].get("nodeName")]
            return (nodes, waiting) if len(nodes) == len(TRAINING_NODES) else None

        nodes, [waiting] = wait_for(
            bound,
            30,
            "a pod bound to each training node",
            describe_last=lambda: (
                controlplane.kubectl("get", "pods", "-n", tenant, "-o", "wide").stdout
            ),
        )

        assert sorted(nodes) == sorted(TRAINING_NODES)
        event = controlplane.wait_for_event(tenant, waiting, "FailedScheduling")
        assert "Insufficient nvidia.com/gpu" in event["message"]
    finally:
        for i in range(len(pods)):  # their GPUs free for the modules that follow
            controlplane.finish_pod_deletion(tenant, f"train-{i}")


def test_an_ordinary_pod_is_admitted_and_bound_to_a_cpu_node(
    controlplane: ControlPlane, live: WebhookServer, tenant: str
) -> None:
    controlplane.apply(pod("web"), namespace=tenant)

    assert controlplane.wait_for_binding(tenant, "web") in nodes_in_pool(None)


# -- what the container runtime honours besides the pod's resources -----------------------


@pytest.mark.parametrize("key", ["nvidia.cdi.k8s.io/pod", "cdi.k8s.io/x"])
def test_a_cdi_annotation_is_refused(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, key: str
) -> None:
    name = "cdi-" + re.sub(r"[^a-z0-9]+", "-", key)
    manifest = pod(name, labels=TRAINING, annotations={key: "nvidia.com/gpu=all"})

    message = refused(controlplane, live, tenant, manifest, "device-annotations")

    assert f"pod has annotation '{key}'" in message


DEVICE_MOUNTS = {
    "device-list": (
        "/dev/null",
        "/var/run/nvidia-container-devices/all",
        "mounts a volume at '/var/run/nvidia-container-devices/all'",
    ),
    "device-node": ("/dev/nvidia0", "/dev/nvidia0", "mounts '/dev/nvidia0' of the node"),
}


@pytest.mark.parametrize("mount", DEVICE_MOUNTS)
def test_a_device_mount_is_refused(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, mount: str
) -> None:
    host_path, mount_path, said = DEVICE_MOUNTS[mount]
    manifest = pod(
        f"mount-{mount}",
        labels=TRAINING,
        container={"volumeMounts": [{"name": "devices", "mountPath": mount_path}]},
        volumes=[{"name": "devices", "hostPath": {"path": host_path}}],
    )

    message = refused(controlplane, live, tenant, manifest, "device-mounts")

    assert said in message


PRIVILEGES = {
    "privileged": ({"privileged": True}, "is privileged (securityContext.privileged: true)"),
    "sys-admin": ({"capabilities": {"add": ["SYS_ADMIN"]}}, "adds capability 'SYS_ADMIN'"),
}


@pytest.mark.parametrize("privilege", PRIVILEGES)
def test_a_privileged_container_is_refused(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, privilege: str
) -> None:
    security, said = PRIVILEGES[privilege]
    manifest = pod(privilege, labels=TRAINING, container={"securityContext": security})

    message = refused(controlplane, live, tenant, manifest, "privileged-containers")

    assert said in message


DEVICE_ENV: dict[str, tuple[dict[str, Any], str]] = {
    "set": (
        {"env": [{"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}]},
        "sets NVIDIA_IMEX_CHANNELS",
    ),
    "prefixed": (
        {"envFrom": [{"prefix": "NVIDIA_", "configMapRef": {"name": "x"}}]},
        "takes variables with prefix 'NVIDIA_'",
    ),
}


@pytest.mark.parametrize("way", DEVICE_ENV)
def test_a_device_request_in_the_environment_is_refused(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, way: str
) -> None:
    container, said = DEVICE_ENV[way]
    manifest = pod(f"env-{way}", labels=TRAINING, container=container)

    message = refused(controlplane, live, tenant, manifest, "device-env")

    assert said in message


KEY_HOLDERS = {
    "ConfigMap": {"data": {"NVIDIA_VISIBLE_DEVICES": SECRET_VALUE}},
    "Secret": {"stringData": {"NVIDIA_VISIBLE_DEVICES": SECRET_VALUE}},
}


@pytest.mark.parametrize("kind", KEY_HOLDERS)
def test_a_device_request_key_is_refused_without_its_value(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, kind: str
) -> None:
    """``envFrom`` without a prefix would turn the key into the variable."""
    name = f"{kind.lower()}-devices"
    manifest = yaml.safe_dump(
        {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, **KEY_HOLDERS[kind]}
    )

    message = refused(controlplane, live, tenant, manifest, "device-env")

    assert f"{kind} key data.NVIDIA_VISIBLE_DEVICES would become variable" in message
    encoded = base64.b64encode(SECRET_VALUE.encode()).decode()
    for shown in (message, live.log()):
        assert SECRET_VALUE not in shown
        assert encoded not in shown


def test_a_configmap_of_ordinary_keys_is_admitted(
    controlplane: ControlPlane, live: WebhookServer, tenant: str, unjudged: str
) -> None:
    """And one with the device key where the namespace did not opt in."""
    ordinary = config_map("settings", {"LOG_LEVEL": "info"})
    devices = config_map("settings", {"NVIDIA_VISIBLE_DEVICES": "all"})

    controlplane.apply(ordinary, namespace=tenant)
    controlplane.apply(devices, namespace=unjudged)

    assert controlplane.get_json("configmap", "settings", tenant)["data"] == {"LOG_LEVEL": "info"}


def config_map(name: str, data: dict[str, str]) -> str:
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    )


# -- GPUs asked as a DeviceClass's extended resource --------------------------------------


def test_a_dra_extended_resource_on_device_plugin_pools_is_refused(
    controlplane: ControlPlane, live: WebhookServer, tenant: str
) -> None:
    manifest = pod("dra-training", labels=TRAINING, container=gpus(64, DRA_GPU))

    message = refused(controlplane, live, tenant, manifest, "gpu-count")

    assert f"pod requests {DRA_GPU}, devices of a DeviceClass" in message
    assert "gives GPUs through the device plugin only" in message
    assert "request nvidia.com/gpu instead" in message


def test_a_dra_extended_resource_without_a_class_is_refused_for_the_class(
    controlplane: ControlPlane, live: WebhookServer, tenant: str
) -> None:
    manifest = pod("dra-unclassed", container=gpus(1, DRA_GPU))

    message = refused(controlplane, live, tenant, manifest, "workload-class")

    assert f"requests {DRA_GPU} but has no label {WORKLOAD}" in message
    assert "requests no GPU" not in message


def test_the_mutation_adds_no_device_plugin_gpu_to_a_pod_asking_through_dra(
    controlplane: ControlPlane,
    live: WebhookServer,
    tenant: str,
    tmp_path: Path,
) -> None:
    """With gpu-count only warned of, the pod is admitted and its mutation is seen; last in
    the module, as it serves another policy for a while."""
    policy = tmp_path / "warned.yaml"
    policy.write_text(default_policy_text() + "\nenforcement:\n  rules:\n    gpu-count: warn\n")
    manifest = pod("dra-warned", labels=TRAINING, container=gpus(8, DRA_GPU))
    live.start(policy, kubeconfig=controlplane.kubeconfig)
    try:
        live.register(controlplane.kubeconfig)
        result = controlplane.kubectl(
            *("apply", "--namespace", tenant, "--dry-run=server", "--output=json", "-f", "-"),
            input=manifest,
        )
    finally:
        live.start(None, kubeconfig=controlplane.kubeconfig)
        live.register(controlplane.kubeconfig)

    assert "Warning: gpu-admission: gpu-count:" in result.stderr
    created = json.loads(result.stdout)
    [main] = created["spec"]["containers"]
    assert main["resources"] == {"limits": {DRA_GPU: "8"}, "requests": {DRA_GPU: "8"}}
    assert created["spec"]["priorityClassName"] == "training-priority"  # it was mutated
