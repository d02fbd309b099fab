"""A pool's offer is asked the same way however its GPUs are reached: the same nodes with
the same GPUs, published as the device plugin's allocatable resources or as DRA devices
in ResourceSlices, answer every question of webhook/engine/capacity/offers.py alike."""

from __future__ import annotations

from decimal import Decimal

import pytest

from webhook.engine.capacity.now import CapacityNow, capacity_now
from webhook.engine.capacity.offers import Largest, PoolOffer, Reached
from webhook.engine.inventory import DeviceFacts, Inventory, NodeFacts, ResourceSliceFacts
from webhook.policy import Policy, load_policy_text
from webhook.policy.load import default_policy_text

A100 = "NVIDIA A100-SXM4-40GB"
DRIVER = "gpu.nvidia.com"
NODES = {"inf-0": (4, {"1g.5gb": 7, "3g.20gb": 2}), "inf-1": (8, {}), "inf-2": (8, {"1g.5gb": 1})}
"""Node -> whole GPUs and MIG devices by profile, as a cluster of the inference pool."""


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The default policy with the inference pool taking GPUs both ways."""
    text = default_policy_text().replace("gpusThrough: devicePlugin", "gpusThrough: both", 1)
    return load_policy_text(text, "both.yaml")


def labelled(name: str, allocatable: dict[str, Decimal]) -> NodeFacts:
    labels = {"gpu-pool": "inference", "nvidia.com/gpu.product": A100.replace(" ", "-")}
    return NodeFacts(name, labels, True, allocatable)


def through_device_plugin(policy: Policy) -> CapacityNow:
    nodes = []
    for name, (whole, mig) in NODES.items():
        allocatable = {policy.gpu_resource: Decimal(whole)}
        allocatable |= {policy.mig_prefix + p: Decimal(n) for p, n in mig.items()}
        nodes.append(labelled(name, allocatable))
    return capacity_now(policy, Inventory(nodes=tuple(nodes), resource_slices=()))


def through_dra(policy: Policy) -> CapacityNow:
    slices = []
    for name, (whole, mig) in NODES.items():
        devices = [
            DeviceFacts(f"gpu-{i}", {"type": "gpu", "productName": A100}) for i in range(whole)
        ]
        devices += [
            DeviceFacts(f"mig-{p}-{i}", {"type": "mig", "productName": A100, "profile": p})
            for p, n in mig.items()
            for i in range(n)
        ]
        slices.append(ResourceSliceFacts(f"{name}-1", DRIVER, name, 1, 1, name, tuple(devices)))
    nodes = tuple(labelled(name, {}) for name in NODES)
    return capacity_now(policy, Inventory(nodes=nodes, resource_slices=tuple(slices)))


def answers(offer: PoolOffer | None) -> dict[str, object]:
    assert offer is not None
    return {
        "name": offer.name,
        "nodes": offer.node_names,
        "models": offer.models,
        "largest": [offer.largest_gpus(model) for model in (None, "A100", "V100")],
        "total": [offer.total_gpus(model) for model in (None, "A100", "V100")],
        "largest MIG": [
            offer.largest_mig(profile, model)
            for profile in ("1g.5gb", "3g.20gb", "7g.40gb")
            for model in (None, "A100")
        ],
        "profiles": [offer.mig_profiles(model) for model in (None, "A100", "V100")],
    }


def test_the_same_gpus_reached_either_way_answer_alike(policy: Policy) -> None:
    plugin = through_device_plugin(policy).offer("inference", Reached.DEVICE_PLUGIN)
    dra = through_dra(policy).offer("inference", Reached.DRA)

    assert answers(plugin) == answers(dra)


def test_an_offer_names_the_node_with_the_most_and_the_total(policy: Policy) -> None:
    for now, reached in (
        (through_device_plugin(policy), Reached.DEVICE_PLUGIN),
        (through_dra(policy), Reached.DRA),
    ):
        offer = now.offer("inference", reached)
        assert offer is not None
        assert offer.largest_gpus() == Largest(Decimal(8), "inf-1")  # the first of the eights
        assert offer.total_gpus("A100") == 20
        assert offer.largest_mig("1g.5gb") == Largest(Decimal(7), "inf-0")
        assert offer.largest_mig("7g.40gb") is None
        assert offer.mig_profiles() == ["1g.5gb", "3g.20gb"]


def test_a_pool_reached_one_way_offers_nothing_known_the_other(policy: Policy) -> None:
    assert through_device_plugin(policy).offer("inference", Reached.DRA) is None
    assert through_dra(policy).offer("inference", Reached.DEVICE_PLUGIN) is None


def test_nothing_is_offered_before_the_inventory_syncs(policy: Policy) -> None:
    now = capacity_now(policy, Inventory())

    assert now.offer("inference", Reached.DEVICE_PLUGIN) is None
    assert now.offer("inference", Reached.DRA) is None
