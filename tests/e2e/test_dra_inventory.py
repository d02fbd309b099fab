"""The live inventory follows GPUs published through DRA, against the real kube-apiserver.

ResourceSlices and DeviceClasses are published with the real kubectl the way a DRA
driver publishes them (``dra.py``: NVIDIA's attribute names and classes under a driver
name of the harness's own); the watcher's snapshot, read through the policy
(``webhook.engine.dra.capacity``), must follow them within seconds as they appear, as a
new generation replaces the devices of a node (in two slices, the first alone counting
for nothing, as kube-scheduler sees it), and as they are withdrawn. ``serve`` itself
reports the new kinds in ``/readyz`` when its policy has a DRA pool, and the serve
ClusterRole of deploy/base lets it watch them.

Nodes here are named ``dra-inv-...`` and are the test's own; the DeviceClasses are
deleted afterwards, as test_controlplane.py does with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.engine.dra.capacity import DraNow, dra_now
from webhook.engine.inventory import Inventory
from webhook.install.plan import base_objects
from webhook.kube.client import api_client
from webhook.kube.inventory import InventoryWatcher
from webhook.policy import Policy, load_policy_text
from webhook.policy.load import default_policy_text
from webhook.service.inventory import inventory_options

from . import dra
from .controlplane import ControlPlane
from .nodes import MODEL_LABEL, POOL_LABEL, NodeSpec, Taint, register_node
from .waiting import wait_for
from .webhook_server import WebhookServer

FOLLOW_TIMEOUT = 20.0
"""How soon a published change must show in the snapshot (generous: two shared cores)."""

A100 = ("NVIDIA A100-SXM4-40GB", "Ampere")
NODE = "dra-inv-a-0"
OTHER = "dra-inv-b-0"


def dra_policy_text() -> str:
    """The default policy with inference on DRA, its GPUs published by the harness's
    driver; the DeviceClasses keep NVIDIA's names, as dra.py publishes them."""
    text = default_policy_text().replace("gpusThrough: devicePlugin", "gpusThrough: dra", 1)
    section = f"\ndra:\n  drivers: [{dra.DRIVER}]\n"
    return text.replace("\nclasses:\n", f"{section}\nclasses:\n", 1)


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy_text(dra_policy_text(), "dra.yaml")


def dra_node(name: str) -> NodeSpec:
    """An inference node whose GPUs come through DRA only: no nvidia.com/gpu capacity."""
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    labels = {POOL_LABEL: "inference", MODEL_LABEL: "A100"}
    return NodeSpec(name, labels, capacity, taints=(Taint(POOL_LABEL, "inference"),))


def slice_of(
    node: str,
    devices: list[dra.Device],
    generation: int,
    *,
    part: int = 0,
    parts: int = 1,
) -> dict[str, object]:
    """Part `part` of `parts` of generation `generation` of `node`'s pool."""
    published = dra.resource_slice(node, devices, generation)
    metadata: Any = published["metadata"]
    spec: Any = published["spec"]
    metadata["name"] = f"{node}-{dra.DRIVER}-g{generation}-{part}"
    spec["pool"]["resourceSliceCount"] = parts
    return published


@pytest.fixture
def published(controlplane: ControlPlane) -> Iterator[list[str]]:
    """Names of the ResourceSlices a test publishes; they, its nodes and the DeviceClasses
    are deleted after it."""
    names: list[str] = []
    try:
        yield names
    finally:
        if names:
            controlplane.delete("resourceslice", names)
        controlplane.delete("deviceclass", [dra.GPU_CLASS, dra.MIG_CLASS])
        controlplane.delete("node", [NODE, OTHER])


def publish(controlplane: ControlPlane, names: list[str], *slices: dict[str, object]) -> None:
    dra.publish(controlplane, slices)
    names += [str(s["metadata"]["name"]) for s in slices]  # type: ignore[index]


@pytest.fixture
def watcher(controlplane: ControlPlane, policy: Policy) -> Iterator[InventoryWatcher]:
    """A watcher with the options serve gives it for the DRA policy."""
    started = InventoryWatcher(api_client(controlplane.kubeconfig), **inventory_options(policy))
    started.start()
    try:
        wait_for(lambda: started.status().synced, 60, "the first sync", interval=0.1)
        yield started
    finally:
        started.stop()


def follow(
    watcher: InventoryWatcher, policy: Policy, check: Callable[[DraNow], Any], what: str
) -> Any:
    """Wait until ``check`` holds of what the pools offer through DRA now."""

    def last() -> str:
        inventory: Inventory = watcher.current
        return f"slices: {inventory.resource_slices}; status: {watcher.status()}"

    return wait_for(
        lambda: check(dra_now(policy, watcher.current)),
        FOLLOW_TIMEOUT,
        what,
        interval=0.1,
        describe_last=last,
    )


def offers(now: DraNow, node: str) -> tuple[dict[str | None, int], dict[Any, int]] | None:
    devices = now.nodes.get(node)
    return (dict(devices.gpus), dict(devices.mig)) if devices else None


def test_the_inventory_follows_resource_slices_appearing_changing_and_disappearing(
    controlplane: ControlPlane,
    watcher: InventoryWatcher,
    policy: Policy,
    published: list[str],
) -> None:
    assert watcher.watches_dra
    register_node(controlplane, dra_node(NODE))
    follow(watcher, policy, lambda now: now.synced and NODE not in now.nodes, "no DRA GPUs yet")

    # Appearing: two whole GPUs, and the classes claims name.
    dra.publish(controlplane, dra.device_classes())
    publish(controlplane, published, slice_of(NODE, dra.whole_gpus(2, *A100, "40Gi"), 1))
    follow(
        watcher,
        policy,
        lambda now: offers(now, NODE) == ({"A100": 2}, {}),
        "two A100s on the node",
    )
    pool = dra_now(policy, watcher.current).pool("inference")
    assert pool is not None and NODE in pool.node_names
    largest = pool.largest_gpus("A100")
    assert largest is not None and largest.amount >= 2
    classes = watcher.current.device_classes or {}
    assert {dra.GPU_CLASS, dra.MIG_CLASS} <= set(classes)
    assert f"'{dra.DRIVER}'" in classes[dra.GPU_CLASS].selectors[0]

    # Changing: generation 2 in two slices, four GPUs and seven MIG devices of one more.
    # Its first slice alone leaves the pool incomplete: nothing counts, not generation 1.
    first = slice_of(NODE, dra.whole_gpus(4, *A100, "40Gi"), 2, part=0, parts=2)
    second = slice_of(NODE, dra.mig_devices(4, "1g.5gb", 7, *A100, "5Gi"), 2, part=1, parts=2)
    publish(controlplane, published, first)
    follow(
        watcher,
        policy,
        lambda now: (
            NODE not in now.nodes
            and [(p.pool, p.generation) for p in now.incomplete] == [(NODE, 2)]
        ),
        "the node offering nothing while generation 2 is incomplete",
    )
    publish(controlplane, published, second)
    follow(
        watcher,
        policy,
        lambda now: offers(now, NODE) == ({"A100": 4}, {("A100", "1g.5gb"): 7}),
        "generation 2 counted: four A100s and seven 1g.5gb devices",
    )
    now = dra_now(policy, watcher.current)
    assert now.incomplete == ()
    pool = now.pool("inference")
    assert pool is not None and "1g.5gb" in pool.mig_profiles("A100")
    # The driver removes the old generation; nothing changes of what counts.
    old = f"{NODE}-{dra.DRIVER}-g1-0"
    controlplane.delete("resourceslice", [old])
    follow(
        watcher,
        policy,
        lambda _: all(s.generation == 2 for s in watcher.current.resource_slices or ()),
        "generation 1 gone from the cache",
    )
    assert offers(dra_now(policy, watcher.current), NODE) == ({"A100": 4}, {("A100", "1g.5gb"): 7})

    # Disappearing: the driver withdraws the node's slices.
    controlplane.delete("resourceslice", [n for n in published if n != old])
    follow(watcher, policy, lambda now: NODE not in now.nodes, "the node's DRA GPUs gone")
    pool_after = dra_now(policy, watcher.current).pool("inference")
    assert pool_after is None or NODE not in pool_after.node_names


def test_slices_of_other_drivers_and_nodes_outside_the_policy_count_for_no_pool(
    controlplane: ControlPlane,
    watcher: InventoryWatcher,
    policy: Policy,
    published: list[str],
) -> None:
    foreign = dra.resource_slice(OTHER, dra.whole_gpus(8, *A100, "40Gi"))
    foreign_spec: Any = foreign["spec"]
    foreign_spec["driver"] = "net.e2e.gpu-admission.io"
    foreign["metadata"] = {"name": f"{OTHER}-net"}
    register_node(controlplane, NodeSpec(OTHER, {}, {"cpu": "8", "memory": "32Gi", "pods": "110"}))
    publish(controlplane, published, foreign, slice_of(OTHER, dra.whole_gpus(1, *A100, "40Gi"), 1))

    devices = follow(
        watcher,
        policy,
        lambda now: now.nodes.get(OTHER),
        "the unpooled node's GPU",
    )

    assert (devices.pool, dict(devices.gpus)) == (None, {None: 1})
    kept = {s.name for s in watcher.current.resource_slices or ()}
    assert f"{OTHER}-net" not in kept


def test_serve_reports_resource_slices_and_device_classes_in_readyz(
    controlplane: ControlPlane,
    admission: WebhookServer,
    tmp_path: Path,
    published: list[str],
) -> None:
    path = tmp_path / "dra.yaml"
    path.write_text(dra_policy_text(), "utf-8")
    with admission.serving(controlplane.kubeconfig, path, kubeconfig=controlplane.kubeconfig):

        def detail() -> str:
            return str(admission.readiness()["checks"]["inventory"]["detail"])

        wait_for(
            lambda: "GPU DeviceClasses the policy names but the cluster lacks: " in detail(),
            FOLLOW_TIMEOUT,
            "the DRA kinds synced, the policy's DeviceClasses missing",
            describe_last=detail,
        )
        text = detail()
        assert "resourceslices: " in text and "known, current" in text
        assert f"lacks: {dra.GPU_CLASS}, {dra.MIG_CLASS}" in text
        dra.publish(controlplane, dra.device_classes())
        wait_for(
            lambda: (
                "GPU DeviceClasses the policy names" not in detail()
                and "deviceclasses: 2 known" in detail()
            ),
            FOLLOW_TIMEOUT,
            "the DeviceClasses known",
            describe_last=detail,
        )


def test_the_serve_cluster_role_may_watch_resource_slices_and_device_classes(
    controlplane: ControlPlane,
) -> None:
    """The ClusterRole of deploy/base, under a name of its own, bound to a user."""
    [role] = [
        o
        for o in base_objects()
        if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "gpu-admission"
    ]
    name, user = "dra-inventory-serve-role", "dra-inventory-reader"
    role = {**role, "metadata": {"name": name}}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    controlplane.apply("\n---\n".join(yaml.safe_dump(o) for o in (role, binding)))
    try:
        for verb in ("list", "watch"):
            for resource in ("resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io"):
                answer = controlplane.kubectl(
                    "auth", "can-i", verb, resource, f"--as={user}", check=False
                )
                assert answer.stdout.strip() == "yes", (verb, resource, answer.stderr)
        denied = controlplane.kubectl(
            "auth", "can-i", "create", "resourceslices.resource.k8s.io", f"--as={user}", check=False
        )
        assert denied.stdout.strip() == "no"
    finally:
        controlplane.delete("clusterrolebinding", [name])
        controlplane.delete("clusterrole", [name])
