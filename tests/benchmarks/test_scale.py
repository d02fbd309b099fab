"""The pure parts of `benchmarks.scale`: the nodes as GPU Feature Discovery labels them,
their ResourceSlices as NVIDIA's DRA driver publishes them, the policy, the churn, the
pods, kube-apiserver's request counter and the report. Nothing here starts a process or
times anything."""

from __future__ import annotations

import datetime
import gc
import math
import os

import pytest

from benchmarks.scale import changes, fleet
from benchmarks.scale.report import (
    LIMIT_MIB,
    Latency,
    SizeFigures,
    chart_values,
    full_collections,
    node_event_counts,
    request_counts,
    request_delta,
    table,
    verdicts,
)
from benchmarks.scale.run import PODS_PER_NAMESPACE, binaries, main, parse_args, sizes_of
from tests.e2e.build_controlplane import GoToolchainMissing
from webhook.engine.inventory import node_facts
from webhook.http.metrics import Metrics
from webhook.policy import load_policy_text
from webhook.service.inventory import inventory_label_keys, inventory_options

NOW = datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)


def test_nodes_carry_gfd_labels_the_pool_taint_and_eight_gpus() -> None:
    node = fleet.node_object(0, NOW)
    labels = node["metadata"]["labels"]
    for key in (
        "nvidia.com/gpu.present",
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.count",
        "nvidia.com/gpu.memory",
        "nvidia.com/gpu.family",
        "nvidia.com/cuda.driver.major",
        "nvidia.com/mig.strategy",
        "gpu-pool",
        "nvidia-gpu-model",
    ):
        assert key in labels, key
    assert labels["nvidia.com/gpu.count"] == "8"
    assert node["spec"]["taints"] == [
        {"key": "gpu-pool", "value": labels["gpu-pool"], "effect": "NoSchedule"}
    ]
    status = node["status"]
    assert status["capacity"]["nvidia.com/gpu"] == "8"
    assert status["allocatable"]["nvidia.com/gpu"] == "8"
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    assert fleet.pool_taints(0) == {"spec": {"taints": node["spec"]["taints"]}}


def test_every_node_is_of_a_pool_and_model_of_the_policy() -> None:
    loaded = load_policy_text(fleet.policy_text(), "scale.yaml")
    keys = inventory_label_keys(loaded)
    for index in range(len(fleet.MODELS)):
        node = fleet.node_object(index, NOW)
        labels = node["metadata"]["labels"]
        pool = loaded.pools[labels["gpu-pool"]]
        model = pool.models[labels["nvidia-gpu-model"]]
        assert labels["nvidia.com/gpu.product"].endswith(model.product)
        facts = node_facts(node, keys)
        assert facts is not None
        assert facts.name == fleet.node_name(index)


def test_the_policy_takes_gpus_both_ways_so_every_kind_is_watched() -> None:
    loaded = load_policy_text(fleet.policy_text(), "scale.yaml")
    assert {pool.gpus_through for pool in loaded.pools.values()} == {"both"}
    options = inventory_options(loaded)
    assert options["dra"] is True
    assert fleet.NVIDIA_DRIVER in options["dra_drivers"]


def test_a_resource_slice_is_nvidias_for_eight_whole_gpus_of_its_node() -> None:
    published = fleet.resource_slice(2)
    spec = published["spec"]
    assert published["apiVersion"] == "resource.k8s.io/v1"
    assert spec["driver"] == "gpu.nvidia.com"
    assert spec["nodeName"] == fleet.node_name(2)
    assert spec["pool"] == {"name": fleet.node_name(2), "generation": 1, "resourceSliceCount": 1}
    devices = spec["devices"]
    assert [device["name"] for device in devices] == [f"gpu-{i}" for i in range(8)]
    attributes = devices[0]["attributes"]
    assert attributes["type"] == {"string": "gpu"}
    assert attributes["productName"] == {"string": "Tesla V100-SXM2-32GB"}
    assert attributes["architecture"] == {"string": "Volta"}
    assert devices[0]["capacity"]["memory"] == {"value": "32768Mi"}
    uuids = {device["attributes"]["uuid"]["string"] for device in devices}
    assert len(uuids) == 8
    names = [c["metadata"]["name"] for c in fleet.device_classes()]
    assert names == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_churn_alternates_labels_and_allocatable_and_turns_each_pass() -> None:
    nodes = 3
    changes = [fleet.churn_patch(step, nodes) for step in range(2 * nodes)]
    assert [name for name, _, _ in changes[:nodes]] == [fleet.node_name(i) for i in range(nodes)]
    assert [sub for _, sub, _ in changes[:4]] == ["", "status", "", "status"]
    _, _, first = changes[1]
    _, _, again = changes[1 + nodes]
    assert changes[1 + nodes][0] == changes[1][0]
    assert first != again


def test_pods_fill_namespaces_of_a_fixed_size_and_some_are_denied() -> None:
    pods = [fleet.audited_pod(index) for index in range(100)]
    assert len({pod["metadata"]["name"] for pod in pods}) == 100
    visible = [
        pod
        for pod in pods
        if any(e["name"] == "NVIDIA_VISIBLE_DEVICES" for e in pod["spec"]["containers"][0]["env"])
    ]
    assert len(visible) == 2
    assert fleet.namespace_name(3) == "team-0003"
    sizes = sizes_of([5000, 1000], 20)
    assert [(s.nodes, s.pods, s.namespaces) for s in sizes] == [
        (1000, 20_000, 20_000 // PODS_PER_NAMESPACE),
        (5000, 100_000, 100_000 // PODS_PER_NAMESPACE),
    ]


def test_tiny_is_small() -> None:
    args = parse_args(["--tiny"])
    assert args.sizes == [20]
    assert args.seconds < 10


METRICS_BEFORE = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="nodes",scope="cluster",subresource="status",verb="PATCH",version="v1"} 7
"""
METRICS_AFTER = METRICS_BEFORE.replace("} 5\n", "} 1005\n").replace("} 3\n", "} 4\n") + (
    'apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",'
    'resource="deployments",scope="namespace",subresource="",verb="LIST",version="v1"} 500\n'
)


def test_the_audits_requests_are_its_lists_and_gets_by_resource() -> None:
    before = request_counts(METRICS_BEFORE)
    assert before == {"LIST pods": 5}
    delta = request_delta(before, request_counts(METRICS_AFTER))
    assert delta == {"LIST deployments": 500, "LIST pods": 1000}


def figures(nodes: int, pss: float, audit_pss: float) -> SizeFigures:
    size = SizeFigures(nodes, nodes, nodes // 10, nodes * 20)
    size.sync_seconds, size.synced_pss, size.sync_peak_pss = 4.0, pss, pss
    size.churn_peak_pss = pss
    size.idle = Latency((0.002, 0.003, 0.004))
    size.churn = Latency((0.002, 0.005, 0.010), failed=1)
    size.churn_changes, size.churn_seconds = 1000, 20.0
    size.churn_events, size.churn_snapshots = 1000, 500  # every allocatable change reached it
    size.audit_seconds, size.audit_peak_pss, size.audit_exit = 30.0, audit_pss, 1
    size.audit_requests = {"LIST pods": nodes, "LIST deployments": nodes // 10}
    size.load = {"sync": (1.0, 0.5, 0.25)}
    return size


def test_a_replicas_node_events_are_read_from_its_metrics() -> None:
    metrics = Metrics()
    metrics.watch_inventory(lambda: {}, lambda: {"nodes": (40, 25), "resourceslices": (9, 9)})

    assert node_event_counts(metrics.exposition().decode()) == (40, 25)
    assert node_event_counts("") == (0, 0)


def test_a_replicas_full_collections_are_read_from_its_metrics() -> None:
    before = full_collections(Metrics().exposition().decode())
    gc.collect()

    after = full_collections(Metrics().exposition().decode())
    assert before is not None and after is not None and after > before
    assert full_collections("") is None


def test_the_table_has_a_column_per_size_and_the_load() -> None:
    small = figures(1000, 150.0, 90.0)
    text = table([small, figures(5000, 200.0, 92.0)])
    lines = text.splitlines()
    assert lines[0].count("|") == 4
    assert "1,000 nodes" in lines[0] and "5,000 nodes" in lines[0]
    assert any("1.00 / 0.50 / 0.25" in line for line in lines)
    ratio = f"{small.churn_ratio:.2f}"
    assert small.churn_ratio > 2
    assert any(ratio in line for line in lines if "churn / idle" in line)
    assert any("5,000" in line for line in lines if "pod LIST pages" in line)


def test_verdicts_and_chart_values() -> None:
    under = [figures(1000, 150.0, 90.0), figures(5000, 200.0, 92.0)]
    under[1].part_audit_pods, under[1].part_audit_peak_pss = 20_000, 88.0
    said = verdicts(under)
    assert any(line.startswith("- MISSED") and "times idle" in line for line in said)
    flat = [line for line in said if "flat in the pod count" in line]
    assert len(flat) == 1 and flat[0].startswith("- met") and "over 5,000 nodes" in flat[0]
    assert chart_values(under) == []
    over = figures(5000, LIMIT_MIB * 0.9, 300.0)
    values = chart_values([over])
    assert "        memory: 512Mi" in values
    assert any("MISSED" in line and "peak PSS" in line for line in verdicts([over]))


def test_a_churn_that_did_not_reach_the_replica_is_not_judged() -> None:
    unreached = figures(5000, 200.0, 92.0)
    unreached.churn_events = unreached.churn_snapshots = 0  # writes of what was there

    said = [line for line in verdicts([unreached]) if "under churn" in line]

    assert said == [
        "- not measured: 5,000 nodes: review p99 under churn, only 0 of the 500 "
        "allocatable changes made reached the replica"
    ]


def test_missing_figures_read_as_not_available() -> None:
    empty = SizeFigures(10, 10, 1, 100)
    assert math.isnan(empty.churn_ratio)
    assert "n/a" in table([empty])


@pytest.mark.e2e
def test_a_tiny_run_goes_through_every_part(capsys: pytest.CaptureFixture[str]) -> None:
    """``--tiny`` end to end on a real control plane and replica (about 25 s): every part
    measured, no review or node change failed; what the figures are is not judged."""
    mode = os.environ.get("GPU_ADMISSION_E2E", "").strip().lower()
    if mode == "off":
        pytest.skip("e2e tests switched off (GPU_ADMISSION_E2E=off)")
    try:
        binaries()
    except GoToolchainMissing as error:
        if mode == "required":
            pytest.fail(f"GPU_ADMISSION_E2E=required but {error}", pytrace=False)
        pytest.skip(str(error))
    (size,) = main(["--tiny"])
    assert not math.isnan(size.sync_seconds)
    assert size.idle.count and not size.idle.failed
    assert size.churn.count and not size.churn.failed
    assert size.churn_changes and not size.churn_failed
    assert size.churn_events >= size.churn_snapshots > 0  # the changes reached the replica
    assert size.audit_exit == 1  # the pods setting NVIDIA_VISIBLE_DEVICES are denied
    assert size.audit_pages >= 1
    assert set(size.load) == {"sync", "idle", "churn", "audit"}
    assert "## Targets" in capsys.readouterr().out


def test_the_cost_of_one_node_changed_is_measured_on_a_small_fleet(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``benchmarks.scale.changes`` at 40 nodes: the worker's rebuilt inventory and the
    followed capacity are checked against the whole ones as it runs; no time is judged."""
    changes.main(["--nodes", "40", "--steps", "5"])

    printed = capsys.readouterr().out
    assert "40 nodes, 40 ResourceSlices" in printed
    assert "capacity followed, told what changed" in printed
    assert "nodes' snapshot with the changed node put at its place" in printed
    assert "inventory to the review worker as what changed" in printed
