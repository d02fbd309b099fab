"""Decisions that follow the cluster: capacity and priority judged on a live inventory.

The inventory is built by hand here as the plain data the service's informer
produces (webhook/engine/inventory.py); webhook/engine/capacity/now.py turns it
into what each pool has now.
"""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path

import jsonpatch
import pytest
import yaml

from tests.builders import GPU_MODEL, admitted, container, pod, pod_create
from tests.e2e.nodes import FLEET, node_manifest, node_status
from webhook.engine import Engine
from webhook.engine.capacity.now import capacity_now
from webhook.engine.inventory import (
    UNKNOWN,
    Inventory,
    NodeFacts,
    PriorityClassFacts,
    node_facts,
)
from webhook.engine.templates import pod_from_template, pod_templates, template_kind
from webhook.policy import load_default_policy


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def node(
    name: str,
    pool: str | None,
    model: str | None = None,
    schedulable: bool = True,
    labels: dict[str, str] | None = None,
    **allocatable: int,
) -> NodeFacts:
    all_labels = dict(labels or {})
    if pool is not None:
        all_labels["gpu-pool"] = pool
    if model is not None:
        all_labels["nvidia-gpu-model"] = model
    resources = {
        ("nvidia.com/" + key.replace("_", "-", 1).replace("_", ".")): Decimal(amount)
        for key, amount in allocatable.items()
    }
    return NodeFacts(name, all_labels, schedulable, resources)


def gpus(amount: int) -> dict[str, int]:
    return {"gpu": amount}


SMALL_TRAINING = Inventory(
    nodes=(
        node("gpu-node-07", "training", "A100", **gpus(4)),
        node("gpu-node-08", "training", "V100", **gpus(2)),
        node("gpu-node-09", "training", "A100", schedulable=False, **gpus(8)),
        node("inference-0", "inference", "A100", gpu=4, mig_1g_5gb=7),
    ),
    priority_classes=None,
)


class TestWholeGpus:
    def test_a_pod_larger_than_every_schedulable_node_of_its_pool_now_is_refused(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, pod("training", containers=[container(gpus=8)]), SMALL_TRAINING)
        assert not decision.allowed
        assert [v.rule for v in decision.violations] == ["gpu-count"]
        assert (
            "pod requests 8 nvidia.com/gpu; the largest node in pool training has 4 "
            "allocatable now (node gpu-node-07); split the work into pods of at most 4"
        ) in decision.message

    def test_a_pod_that_fits_the_largest_node_now_is_admitted(self, engine: Engine) -> None:
        decision = admitted(engine, pod("training", containers=[container(gpus=4)]), SMALL_TRAINING)
        assert decision.allowed, decision.message

    def test_the_policy_figures_hold_until_the_nodes_have_synced(self, engine: Engine) -> None:
        decision = admitted(engine, pod("training", containers=[container(gpus=8)]), UNKNOWN)
        assert decision.allowed, decision.message

    def test_a_pool_with_no_schedulable_gpu_node_keeps_the_policy_figures(
        self, engine: Engine
    ) -> None:
        # e.g. a node group scaled to zero: the autoscaler adds 8-GPU nodes on demand.
        scaled_to_zero = Inventory(
            nodes=(node("gpu-node-09", "training", "A100", schedulable=False, **gpus(8)),),
        )
        decision = admitted(engine, pod("training", containers=[container(gpus=8)]), scaled_to_zero)
        assert decision.allowed, decision.message

    def test_a_model_with_no_node_now_keeps_the_policy_figures(self, engine: Engine) -> None:
        # Only V100 nodes now: the A100 node group may be scaled to zero.
        v100_only = Inventory(nodes=(node("gpu-node-08", "training", "V100", **gpus(2)),))
        pinned_a100 = pod("training", containers=[container(gpus=8)], labels={GPU_MODEL: "A100"})
        unpinned = pod("training", containers=[container(gpus=8)])
        pinned_v100 = pod("training", containers=[container(gpus=4)], labels={GPU_MODEL: "V100"})

        assert admitted(engine, pinned_a100, v100_only).allowed
        assert admitted(engine, unpinned, v100_only).allowed
        refused = admitted(engine, pinned_v100, v100_only)
        assert not refused.allowed
        assert "with model V100 has 2 allocatable now (node gpu-node-08)" in refused.message

    def test_a_pinned_model_is_judged_by_the_nodes_of_that_model(self, engine: Engine) -> None:
        obj = pod("training", containers=[container(gpus=4)], labels={GPU_MODEL: "V100"})
        decision = admitted(engine, obj, SMALL_TRAINING)
        assert not decision.allowed
        assert "the largest node in pool training with model V100 has 2 allocatable now" in (
            decision.message
        )
        assert "(node gpu-node-08)" in decision.message

    def test_a_node_known_only_by_its_gpu_product_label_counts_for_its_model(
        self, engine: Engine
    ) -> None:
        discovered = Inventory(
            nodes=(
                node(
                    "gfd-node",
                    "training",
                    labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                    **gpus(8),
                ),
            )
        )
        now = capacity_now(engine.policy, discovered)
        training = now.pool("training")
        assert training is not None and training.models == {"A100"}
        obj = pod("training", containers=[container(gpus=8)], labels={GPU_MODEL: "A100"})
        assert admitted(engine, obj, discovered).allowed


class TestMigSlices:
    def test_a_profile_no_node_of_the_pool_offers_now_is_refused_with_what_is_offered(
        self, engine: Engine
    ) -> None:
        obj = pod("inference", containers=[container(limits={"nvidia.com/mig-3g.20gb": "1"})])
        decision = admitted(engine, obj, SMALL_TRAINING)
        assert not decision.allowed
        assert [v.rule for v in decision.violations] == ["mig-profile"]
        assert (
            "MIG profile 3g.20gb is not offered now by any schedulable node of pool inference; "
            "offered now: 1g.5gb"
        ) in decision.message

    def test_more_slices_than_one_node_holds_now_names_the_largest_node(
        self, engine: Engine
    ) -> None:
        obj = pod("inference", containers=[container(limits={"nvidia.com/mig-1g.5gb": "8"})])
        decision = admitted(engine, obj, SMALL_TRAINING)
        assert not decision.allowed
        assert (
            "pod requests 8 nvidia.com/mig-1g.5gb; the largest node in pool inference has 7 "
            "allocatable now (node inference-0)"
        ) in decision.message

    def test_a_pool_whose_nodes_offer_no_slices_now_says_their_mig_strategy(
        self, engine: Engine
    ) -> None:
        single = Inventory(
            nodes=(
                node(
                    "inference-9",
                    "inference",
                    "A100",
                    labels={"nvidia.com/mig.strategy": "single"},
                    gpu=8,
                ),
            )
        )
        obj = pod("inference", containers=[container(limits={"nvidia.com/mig-1g.5gb": "1"})])
        decision = admitted(engine, obj, single)
        assert not decision.allowed
        assert (
            "its nodes offer no MIG slices (MIG strategy of its nodes: single); request "
            "nvidia.com/gpu instead"
        ) in decision.message

    def test_slices_a_node_offers_now_are_admitted(self, engine: Engine) -> None:
        obj = pod("inference", containers=[container(limits={"nvidia.com/mig-1g.5gb": "7"})])
        assert admitted(engine, obj, SMALL_TRAINING).allowed

    def test_a_name_that_is_no_mig_profile_is_refused_whatever_the_nodes(
        self, engine: Engine
    ) -> None:
        obj = pod("inference", containers=[container(limits={"nvidia.com/mig-big": "1"})])
        decision = admitted(engine, obj, SMALL_TRAINING)
        assert "nvidia.com/mig-big is not a MIG resource name" in decision.message


PRIORITY_CLASSES = {
    "inference-priority": PriorityClassFacts("inference-priority", 2000000, "PreemptLowerPriority"),
    "training-priority": PriorityClassFacts("training-priority", 1000, "Never"),
}


class TestPriorityClasses:
    def test_the_injected_priority_is_the_value_of_the_class_in_the_cluster(
        self, engine: Engine
    ) -> None:
        inventory = Inventory(priority_classes=PRIORITY_CLASSES)
        decision = engine.mutate(pod_create(pod("inference")), inventory)
        patched = jsonpatch.apply_patch(pod("inference"), list(decision.patch))
        assert patched["spec"]["priorityClassName"] == "inference-priority"
        assert patched["spec"]["priority"] == 2000000
        assert patched["spec"]["preemptionPolicy"] == "PreemptLowerPriority"

    def test_the_policy_value_is_injected_until_the_classes_have_synced(
        self, engine: Engine
    ) -> None:
        decision = engine.mutate(pod_create(pod("inference")), UNKNOWN)
        patched = jsonpatch.apply_patch(pod("inference"), list(decision.patch))
        assert patched["spec"]["priority"] == 1000000

    def test_a_class_the_cluster_does_not_have_gets_a_denial_that_says_so(
        self, engine: Engine
    ) -> None:
        inventory = Inventory(
            priority_classes={"training-priority": PRIORITY_CLASSES["training-priority"]}
        )
        decision = admitted(engine, pod("inference"), inventory)
        assert not decision.allowed
        assert [v.rule for v in decision.violations] == ["priority-class"]
        assert (
            "the policy runs inference pods at PriorityClass 'inference-priority', which does "
            "not exist in this cluster"
        ) in decision.message
        assert admitted(engine, pod("training"), inventory).allowed

    def test_a_class_the_cluster_does_not_have_is_not_injected(self, engine: Engine) -> None:
        inventory = Inventory(priority_classes={})
        decision = engine.mutate(pod_create(pod("inference")), inventory)
        paths = {operation["path"] for operation in decision.patch}
        assert not {"/spec/priorityClassName", "/spec/priority"} & paths


def test_what_pools_have_now_is_worked_out_once_per_inventory(engine: Engine) -> None:
    first = engine.capacity(SMALL_TRAINING)
    assert engine.capacity(SMALL_TRAINING) is first
    training = first.pool("training")
    assert training is not None
    assert training.nodes == ("gpu-node-07", "gpu-node-08")
    assert training.total_of("nvidia.com/gpu") == 6
    assert training.total_of("nvidia.com/gpu", "V100") == 2
    assert engine.capacity(UNKNOWN).pools == {}


def test_the_shipped_examples_are_judged_alike_on_the_test_fleet_and_on_the_policy_figures(
    engine: Engine,
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    fleet = tuple(
        facts
        for spec in FLEET
        if (facts := node_facts({**node_manifest(spec), **node_status(spec, now)})) is not None
    )
    classes = {
        c.priority_class.name: PriorityClassFacts(
            c.priority_class.name, c.priority_class.value, None
        )
        for c in engine.policy.classes.values()
    }
    live = engine.capacity(Inventory(nodes=fleet, priority_classes=classes))
    static = engine.capacity(UNKNOWN)
    examples = sorted((Path(__file__).parents[3] / "examples").rglob("*.yaml"))
    assert examples
    for path in examples:
        for document in yaml.safe_load_all(path.read_text("utf-8")):
            kind = template_kind(document, engine.kinds)
            assert kind is not None, path
            for _, template in pod_templates(document, kind):
                obj = document if kind.kind == "Pod" else pod_from_template(template)
                rules = [v.rule for v in engine.created_pod_violations(obj, static)]
                assert [v.rule for v in engine.created_pod_violations(obj, live)] == rules, path
