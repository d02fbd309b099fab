"""The live inventory (webhook.kube.inventory) against the real kube-apiserver.

Nodes and PriorityClasses are changed with the real kubectl; the watcher's snapshot
must follow within seconds. Dropped connections are real (a TCP proxy resets them),
the 410 is the apiserver's own answer to a resourceVersion it no longer holds, and
"not synced yet" is a watcher pointed at a port where nothing listens.

Nodes and PriorityClasses here are named ``inv-...``: the apiserver is shared with the
other e2e tests (and their GPU fleet), which these tests neither touch nor rely on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import client

from webhook.engine.inventory import Inventory, NodeFacts, changed_nodes
from webhook.kube.client import api_client
from webhook.kube.inventory import InventoryWatcher

from .controlplane import ControlPlane
from .nodes import NodeSpec, register_node
from .ports import free_ports
from .tcp_proxy import TcpProxy
from .waiting import wait_for

# Generous: two cores, shared with another engineer's tests.
FOLLOW_TIMEOUT = 20.0
GPU = "nvidia.com/gpu"

WatcherFactory = Callable[..., InventoryWatcher]


@pytest.fixture
def make_watcher() -> Iterator[WatcherFactory]:
    """Start watchers on a kubeconfig; every one is stopped at the end of the test."""
    started: list[InventoryWatcher] = []

    def make(kubeconfig: Path, **options: Any) -> InventoryWatcher:
        watcher = InventoryWatcher(api_client(kubeconfig), **options)
        started.append(watcher)
        watcher.start()
        return watcher

    yield make
    for watcher in started:
        watcher.stop()


@pytest.fixture
def cleanup(controlplane: ControlPlane) -> Iterator[list[tuple[str, str]]]:
    """(kind, name) of cluster-scoped objects to delete after the test."""
    objects: list[tuple[str, str]] = []
    yield objects
    for kind, name in objects:
        controlplane.kubectl("delete", kind, name, "--ignore-not-found", "--wait=false")


def kubeconfig_for(controlplane: ControlPlane, server: str, path: Path) -> Path:
    """A copy of the admin kubeconfig that talks to ``server`` instead."""
    config = yaml.safe_load(controlplane.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


def gpu_node(name: str, gpus: int, **labels: str) -> NodeSpec:
    capacity = {"cpu": "32", "memory": "128Gi", "pods": "110", GPU: str(gpus)}
    return NodeSpec(name, labels, capacity)


def node_named(inventory: Inventory, name: str) -> NodeFacts | None:
    return next((node for node in inventory.nodes or () if node.name == name), None)


def follow(watcher: InventoryWatcher, check: Callable[[Inventory], Any], what: str) -> Any:
    """Wait until ``check(watcher.current)`` is truthy; show the status otherwise."""
    return wait_for(
        lambda: check(watcher.current),
        FOLLOW_TIMEOUT,
        what,
        interval=0.1,
        describe_last=lambda: f"status: {watcher.status()}",
    )


def synced(watcher: InventoryWatcher) -> None:
    wait_for(lambda: watcher.status().synced, 60, "the first sync", interval=0.1)


def cluster_node_names(controlplane: ControlPlane) -> set[str]:
    return {node["metadata"]["name"] for node in controlplane.list_json("nodes")}


def cluster_priority_class_names(controlplane: ControlPlane) -> set[str]:
    return {pc["metadata"]["name"] for pc in controlplane.list_json("priorityclasses")}


def test_a_node_is_followed_from_creation_to_deletion(
    controlplane: ControlPlane, make_watcher: WatcherFactory, cleanup: list[tuple[str, str]]
) -> None:
    snapshots: list[Inventory] = []
    # Pages of two: the first LIST takes several requests whenever the fleet is there.
    watcher = make_watcher(controlplane.kubeconfig, page_size=2, on_change=snapshots.append)
    synced(watcher)
    status = watcher.status()
    assert status.nodes.last_error is None
    assert status.nodes.resource_version
    ages = watcher.sync_age_seconds()
    assert set(ages) == {"nodes", "priorityclasses"}
    assert all(age is not None and age < 60 for age in ages.values())
    # Whatever nodes the cluster has (the fleet of other tests, or none), all of them.
    follow(
        watcher,
        lambda inventory: (
            {node.name for node in inventory.nodes or ()} == cluster_node_names(controlplane)
        ),
        "the snapshot to hold exactly the cluster's nodes",
    )

    name = "inv-follow-0"
    cleanup.append(("node", name))
    register_node(controlplane, gpu_node(name, 4, **{"gpu-pool": "inv-a", "zone": "z1"}))
    node = follow(watcher, lambda inv: node_named(inv, name), f"{name} to appear")
    assert node.allocatable == {GPU: Decimal(4)}  # CPU, memory, pods are not kept
    assert node.labels["gpu-pool"] == "inv-a"
    assert node.labels["kubernetes.io/hostname"] == name
    assert node.schedulable

    controlplane.kubectl("label", "node", name, "gpu-pool=inv-b", "extra=yes", "--overwrite")
    node = follow(
        watcher,
        lambda inv: (n := node_named(inv, name)) and n.labels.get("extra") == "yes" and n,
        f"{name}'s new labels",
    )
    assert node.labels["gpu-pool"] == "inv-b"

    controlplane.kubectl("cordon", name)
    follow(watcher, lambda inv: (n := node_named(inv, name)) and not n.schedulable, "the cordon")

    # More GPUs reported through the status subresource, as a device plugin would.
    patch = {"status": {"capacity": {GPU: "8"}, "allocatable": {GPU: "8"}}}
    controlplane.kubectl(
        "patch", "node", name, "--subresource=status", "--type=merge", "--patch", json.dumps(patch)
    )
    follow(
        watcher,
        lambda inv: (n := node_named(inv, name)) and n.allocatable == {GPU: Decimal(8)},
        "the new allocatable",
    )

    controlplane.kubectl("delete", "node", name)
    follow(watcher, lambda inv: node_named(inv, name) is None, f"{name} to go")

    # Every change published a snapshot, each an immutable whole, in order.
    assert snapshots[-1] is watcher.current
    seen = [node_named(inventory, name) for inventory in snapshots]
    assert seen[-1] is None
    assert any(n is not None and not n.schedulable for n in seen)

    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 3, "stop() must close the live watches at once"
    assert not watcher.running


def test_priority_classes_are_followed(
    controlplane: ControlPlane, make_watcher: WatcherFactory, cleanup: list[tuple[str, str]]
) -> None:
    watcher = make_watcher(controlplane.kubeconfig)
    synced(watcher)
    classes = watcher.current.priority_classes
    assert classes is not None
    # Built in to every cluster.
    assert classes["system-node-critical"].value == 2000001000

    name = "inv-batch-low"
    cleanup.append(("priorityclass", name))
    controlplane.apply(
        yaml.safe_dump(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": 1234,
                "preemptionPolicy": "Never",
            }
        )
    )
    facts = follow(
        watcher,
        lambda inv: inv.priority_classes is not None and inv.priority_classes.get(name),
        f"PriorityClass {name} to appear",
    )
    assert (facts.value, facts.preemption_policy) == (1234, "Never")

    controlplane.kubectl("delete", "priorityclass", name)
    follow(
        watcher,
        lambda inv: inv.priority_classes is not None and name not in inv.priority_classes,
        f"PriorityClass {name} to go",
    )
    classes = watcher.current.priority_classes
    assert classes is not None
    assert watcher.status().priority_classes.objects == len(classes)


RECUT_SECONDS = 4.0
"""How long a severed watch is given to relist before the connections are cut again."""


def test_a_severed_connection_is_reestablished(
    controlplane: ControlPlane,
    make_watcher: WatcherFactory,
    cleanup: list[tuple[str, str]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="gpu_admission.inventory")
    api = urlsplit(controlplane.api_url)
    assert api.hostname is not None and api.port is not None
    with TcpProxy(api.hostname, api.port) as proxy:
        # The apiserver's certificate names 127.0.0.1, whatever the port.
        kubeconfig = kubeconfig_for(
            controlplane, f"https://127.0.0.1:{proxy.port}", tmp_path / "proxied.kubeconfig"
        )
        watcher = make_watcher(kubeconfig)
        synced(watcher)
        before = watcher.status()
        accepted = proxy.accepted

        # Both watches are live connections through the proxy; cut them all. A LIST's
        # connection is live too, idle in the client's pool, so wait for both watches to
        # have been asked for: cutting before one is would leave it uncut.
        wait_for(
            lambda: (
                {
                    r.kind  # type: ignore[attr-defined]
                    for r in caplog.records
                    if r.getMessage() == "inventory watch starting"
                }
                >= {"nodes", "priorityclasses"}
            ),
            10,
            "both watches to start",
        )
        wait_for(lambda: proxy.live >= 2, 10, "both watch connections")
        assert proxy.sever() >= 2

        name = "inv-after-sever-0"
        cleanup.append(("node", name))
        register_node(controlplane, gpu_node(name, 2, **{"gpu-pool": "inv-c"}))
        follow(watcher, lambda inv: node_named(inv, name), f"{name} after the connections were cut")

        # A dropped watch means events may have been lost: each kind relists, over new
        # connections (the one with nothing to report maybe after its back-off). A watch
        # whose request had not yet reached the proxy when it was cut runs on a new
        # connection, uncut: cut again every few seconds until both have relisted.
        last_cut = [time.monotonic()]
        cuts = [1]

        def relisted() -> bool:
            done = all(
                now.lists > then.lists
                for now, then in zip(watcher.status().kinds(), before.kinds(), strict=True)
            )
            if not done and time.monotonic() - last_cut[0] > RECUT_SECONDS:
                proxy.sever()
                last_cut[0] = time.monotonic()
                cuts[0] += 1
            return done

        wait_for(
            relisted,
            FOLLOW_TIMEOUT,
            "both kinds to relist",
            describe_last=lambda: repr(watcher.status()),
        )
        assert proxy.accepted > accepted
        failures = [
            r for r in caplog.records if r.getMessage().startswith("inventory watch failed")
        ]
        assert {r.kind for r in failures} == {"nodes", "priorityclasses"}  # type: ignore[attr-defined]
        logged = [(r.kind, r.reason) for r in failures]  # type: ignore[attr-defined]
        if cuts[0] == 1:  # cut again, a watch fails again for the same reason
            assert len(logged) == len(set(logged)), f"a failure was logged twice: {logged}"
        # And it keeps following.
        controlplane.kubectl("cordon", name)
        follow(watcher, lambda inv: (n := node_named(inv, name)) and not n.schedulable, "cordon")
        watcher.stop()


def test_a_watch_that_times_out_resumes_without_relisting(
    controlplane: ControlPlane, make_watcher: WatcherFactory, cleanup: list[tuple[str, str]]
) -> None:
    watcher = make_watcher(controlplane.kubeconfig, watch_timeout_seconds=1)
    synced(watcher)
    time.sleep(4)  # several server-side timeouts, each ending a stream normally
    name = "inv-after-timeout-0"
    cleanup.append(("node", name))
    register_node(controlplane, gpu_node(name, 3))
    follow(watcher, lambda inv: node_named(inv, name), f"{name} to appear")
    status = watcher.status()
    assert (status.nodes.lists, status.priority_classes.lists) == (1, 1)
    assert status.nodes.last_error is None
    # Ends of streams count as "known current": the age stays small while idle.
    assert (status.priority_classes.age() or 0) < 5


def test_facts_that_stay_equal_stay_the_same_objects(
    controlplane: ControlPlane, make_watcher: WatcherFactory, cleanup: list[tuple[str, str]]
) -> None:
    """The engine tells which nodes changed between two snapshots by identity, so a label
    the inventory does not keep (GPU Feature Discovery's timestamp) publishes nothing, and
    a node's new allocatable is the one changed object in the next snapshot."""
    names = ("inv-same-0", "inv-same-1")
    for name in names:
        cleanup.append(("node", name))
        register_node(controlplane, gpu_node(name, 8, **{"gpu-pool": "inv-same"}))
    snapshots: list[Inventory] = []
    watcher = make_watcher(
        controlplane.kubeconfig, node_label_keys={"gpu-pool"}, on_change=snapshots.append
    )
    synced(watcher)
    follow(watcher, lambda inv: all(node_named(inv, n) for n in names), "both nodes")
    before = watcher.current
    published = len(snapshots)
    counted = watcher.status().nodes

    controlplane.kubectl(
        "label", "node", names[0], "nvidia.com/gfd.timestamp=1764633600", "--overwrite"
    )
    patch = {"status": {"allocatable": {GPU: "7"}}}
    controlplane.kubectl(
        "patch",
        "node",
        names[1],
        "--subresource=status",
        "--type=merge",
        "--patch",
        json.dumps(patch),
    )
    after = follow(
        watcher,
        lambda inv: (n := node_named(inv, names[1])) and n.allocatable[GPU] == 7 and inv,
        "the new allocatable",
    )

    assert len(snapshots) == published + 1, "the unkept label published no snapshot"
    assert before.nodes is not None and after.nodes is not None
    changes = changed_nodes(before.nodes, after.nodes)
    assert changes is not None
    assert [new.name for _, new in changes] == [names[1]]
    # the snapshot tells that change itself, so capacity is followed without a pass
    told = after.nodes_changed
    assert told is not None and told.since is before.nodes and told.now is after.nodes
    assert told.at == ([node.name for node in after.nodes].index(names[1]),)
    assert node_named(after, names[0]) is node_named(before, names[0])
    # both events counted, one of them a change (gpu_admission_inventory_* metrics)
    counts = wait_for(
        lambda: (now := watcher.status().nodes).events - counted.events >= 2 and now,
        10,
        "both watch events counted",
    )
    assert counts.changes - counted.changes == len(snapshots) - published == 1


def test_before_the_first_sync_nothing_is_known(
    controlplane: ControlPlane, make_watcher: WatcherFactory, tmp_path: Path
) -> None:
    (port,) = free_ports(1)  # nothing listens there
    kubeconfig = kubeconfig_for(
        controlplane, f"https://127.0.0.1:{port}", tmp_path / "nowhere.kubeconfig"
    )
    watcher = make_watcher(kubeconfig, relist_backoff_cap=1.0)
    wait_for(
        lambda: all(kind.last_error for kind in watcher.status().kinds()),
        60,
        "the first failed attempts",
    )
    status = watcher.status()
    assert "Connection refused" in (status.nodes.last_error or "")
    assert not status.synced and not status.nodes.synced
    assert (status.nodes.objects, status.nodes.lists, status.nodes.current_at) == (0, 0, None)
    assert watcher.current == Inventory(nodes=None, priority_classes=None)
    assert watcher.sync_age_seconds() == {"nodes": None, "priorityclasses": None}

    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 3
    assert not watcher.running


# -- 410 Gone: last in the module, so that the churn class is old enough by then ----------

# The watch cache answers "too old resource version" (410) only once it has dropped an
# event, which it does only when its buffer (100 events at first) is full and the oldest
# event in it is older than 75 s; a full buffer of fresher events doubles instead.
EVENT_FRESH_SECONDS = 75.0
CHURN_CLASS = "inv-churn"


@pytest.fixture(scope="module", autouse=True)
def churn_class(controlplane: ControlPlane) -> Iterator[float]:
    """A PriorityClass created when this module starts; yields when (monotonic)."""
    controlplane.apply(
        yaml.safe_dump(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": CHURN_CLASS},
                "value": 7,
            }
        )
    )
    created = time.monotonic()
    yield created
    controlplane.kubectl("delete", "priorityclass", CHURN_CLASS, "--ignore-not-found")


def expire_priority_class_history(controlplane: ControlPlane, created: float) -> str:
    """Make the apiserver's PriorityClass watch cache drop its oldest events, so that a
    watch from resourceVersion 1 is answered with 410. Returns that answer's message.

    Waits until every PriorityClass event in the cache is older than 75 s (the churn
    class was created when this module started), then updates the churn class quickly
    until the buffer is full: the oldest event is evicted, not kept by doubling.
    """
    time.sleep(max(0.0, created + EVENT_FRESH_SECONDS + 2 - time.monotonic()))
    scheduling: Any = client.SchedulingV1Api(api_client(controlplane.kubeconfig))
    for i in range(1, 1001):
        scheduling.patch_priority_class(
            CHURN_CLASS, {"metadata": {"annotations": {"inv-churn": str(i)}}}
        )
        if i % 20 == 0:
            response = scheduling.list_priority_class(
                watch=True, resource_version="1", timeout_seconds=1, _preload_content=False
            )
            first = response.data.split(b"\n", 1)[0]
            event = json.loads(first) if first else {}
            if event.get("type") == "ERROR" and event["object"].get("code") == 410:
                return str(event["object"].get("message"))
    raise AssertionError("the watch cache never answered 410 for resourceVersion 1")


def test_an_expired_resource_version_makes_it_relist(
    controlplane: ControlPlane,
    make_watcher: WatcherFactory,
    cleanup: list[tuple[str, str]],
    caplog: pytest.LogCaptureFixture,
    churn_class: float,
) -> None:
    caplog.set_level(logging.INFO, logger="gpu_admission.inventory")
    watcher = make_watcher(controlplane.kubeconfig)
    synced(watcher)
    message = expire_priority_class_history(controlplane, churn_class)
    assert "too old resource version: 1" in message
    before = watcher.status()

    # Resume both watches from resourceVersion 1, which the apiserver no longer holds
    # for PriorityClasses (for Nodes it may still: then it replays their history).
    watcher.interrupt(resume_from="1")
    wait_for(
        lambda: watcher.status().priority_classes.lists > before.priority_classes.lists,
        FOLLOW_TIMEOUT,
        "the PriorityClasses to relist",
        describe_last=lambda: f"status: {watcher.status()}",
    )
    expired = [r for r in caplog.records if r.getMessage() == "inventory watch expired; relisting"]
    reasons = {r.kind: r.reason for r in expired}  # type: ignore[attr-defined]
    assert "410" in reasons["priorityclasses"], reasons
    assert "too old resource version" in reasons["priorityclasses"], reasons
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    # After the relist the snapshot is the cluster's, and changes keep arriving.
    name = "inv-after-410"
    cleanup.append(("priorityclass", name))
    controlplane.kubectl("create", "priorityclass", name, "--value=42")
    follow(
        watcher,
        lambda inv: (
            inv.priority_classes is not None
            and set(inv.priority_classes) == cluster_priority_class_names(controlplane)
        ),
        "the PriorityClasses to match the cluster after the relist",
    )
    classes = watcher.current.priority_classes
    assert classes is not None
    assert (classes[name].value, classes[CHURN_CLASS].value) == (42, 7)
    follow(
        watcher,
        lambda inv: {n.name for n in inv.nodes or ()} == cluster_node_names(controlplane),
        "the Nodes to match the cluster",
    )
