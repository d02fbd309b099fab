"""What each pool of a policy offers through DRA now: per node, whole GPUs and MIG devices
by model and profile, from the slices that count (webhook/engine/dra/capacity.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from webhook.engine.capacity.offers import Largest
from webhook.engine.dra.capacity import UNKNOWN, dra_now, gpu_device_classes
from webhook.engine.inventory import (
    DeviceClassFacts,
    DeviceFacts,
    Inventory,
    NodeFacts,
    ResourceSliceFacts,
)
from webhook.policy import Policy, load_policy_text
from webhook.policy.load import default_policy_text

DRIVER = "gpu.nvidia.com"
A100_40 = "NVIDIA A100-SXM4-40GB"
A100_80 = "NVIDIA A100-SXM4-80GB"
V100 = "Tesla V100-SXM2-32GB"


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The default policy with inference on DRA and training on both."""
    text = default_policy_text()
    text = text.replace("gpusThrough: devicePlugin", "gpusThrough: dra", 1)
    text = text.replace("gpusThrough: devicePlugin", "gpusThrough: both", 1)
    return load_policy_text(text, "dra.yaml")


def node(
    name: str, pool: str | None, model: str | None = None, schedulable: bool = True
) -> NodeFacts:
    labels = {"gpu-pool": pool} if pool else {}
    if model:
        labels["nvidia-gpu-model"] = model
    return NodeFacts(name, labels, schedulable, {})


def gpus(count: int, product: str | None = A100_40, start: int = 0) -> list[DeviceFacts]:
    attributes: dict[str, str | int | bool] = {"type": "gpu"}
    if product is not None:
        attributes["productName"] = product
    return [DeviceFacts(f"gpu-{start + i}", attributes) for i in range(count)]


def migs(count: int, profile: str, product: str = A100_40) -> list[DeviceFacts]:
    attributes: dict[str, str | int | bool] = {
        "type": "mig",
        "productName": product,
        "profile": profile,
    }
    return [DeviceFacts(f"mig-{profile}-{i}", attributes) for i in range(count)]


def published(
    node_name: str,
    devices: list[DeviceFacts],
    generation: int = 1,
    driver: str = DRIVER,
    count: int = 1,
    name: str | None = None,
) -> ResourceSliceFacts:
    return ResourceSliceFacts(
        name or f"{node_name}-{driver}-{generation}",
        driver,
        node_name,
        generation,
        count,
        node_name,
        tuple(devices),
    )


def test_nothing_is_known_until_the_slices_are_listed(policy: Policy) -> None:
    now = dra_now(policy, Inventory(nodes=(node("inf-0", "inference"),)))

    assert now == UNKNOWN and not now.synced
    assert now.pool("inference") is None


def test_a_pool_counts_whole_gpus_and_mig_devices_of_its_nodes_by_model_and_profile(
    policy: Policy,
) -> None:
    inventory = Inventory(
        nodes=(node("inf-0", "inference"), node("inf-1", "inference")),
        resource_slices=(
            published("inf-0", gpus(4) + migs(7, "1g.5gb") + migs(2, "3g.20gb")),
            published("inf-1", gpus(8)),
        ),
    )

    now = dra_now(policy, inventory)

    assert now.synced
    pool = now.pool("inference")
    assert pool is not None
    assert pool.node_names == ("inf-0", "inf-1")
    assert pool.models == {"A100"}
    assert pool.largest_gpus() == Largest(Decimal(8), "inf-1")
    assert pool.largest_gpus("A100") == Largest(Decimal(8), "inf-1")
    assert pool.total_gpus() == 12
    assert pool.largest_mig("1g.5gb") == Largest(Decimal(7), "inf-0")
    assert pool.largest_mig("7g.40gb") is None
    assert pool.mig_profiles() == ["1g.5gb", "3g.20gb"]
    inf_0 = now.nodes["inf-0"]
    assert inf_0.gpus == {"A100": 4}
    assert inf_0.mig == {("A100", "1g.5gb"): 7, ("A100", "3g.20gb"): 2}
    assert inf_0.products == {A100_40}


def test_a_mixed_pool_tells_its_models_apart_by_product(policy: Policy) -> None:
    inventory = Inventory(
        nodes=(node("train-v", "training"), node("train-a", "training")),
        resource_slices=(
            published("train-v", gpus(8, V100)),
            published("train-a", gpus(4, A100_80)),
        ),
    )

    pool = dra_now(policy, inventory).pool("training")

    assert pool is not None
    assert pool.models == {"V100", "A100"}
    assert pool.largest_gpus("V100") == Largest(Decimal(8), "train-v")
    assert pool.largest_gpus("A100") == Largest(Decimal(4), "train-a")
    assert pool.largest_gpus() == Largest(Decimal(8), "train-v")


def test_a_product_no_model_has_falls_back_to_the_nodes_model_label_else_is_not_known(
    policy: Policy,
) -> None:
    inventory = Inventory(
        nodes=(node("labelled", "training", model="V100"), node("bare", "training")),
        resource_slices=(
            published("labelled", gpus(2, "NVIDIA H100 80GB HBM3")),
            published("bare", gpus(2, "NVIDIA H100 80GB HBM3") + gpus(1, None, start=2)),
        ),
    )

    now = dra_now(policy, inventory)

    assert now.nodes["labelled"].gpus == {"V100": 2}
    assert now.nodes["bare"].gpus == {None: 3}
    pool = now.pool("training")
    assert pool is not None and pool.models == {"V100"}
    assert pool.largest_gpus() == Largest(Decimal(3), "bare")


def test_only_the_newest_complete_generation_counts(policy: Policy) -> None:
    nodes = (node("inf-0", "inference"),)
    old = published("inf-0", gpus(8), generation=1)
    arriving = published("inf-0", gpus(2), generation=2, count=2, name="inf-0-2a")
    rest = published("inf-0", gpus(2, start=2), generation=2, count=2, name="inf-0-2b")

    while_arriving = dra_now(policy, Inventory(nodes=nodes, resource_slices=(old, arriving)))
    arrived = dra_now(policy, Inventory(nodes=nodes, resource_slices=(old, arriving, rest)))

    assert while_arriving.pool("inference") is None
    assert [(p.pool, p.generation) for p in while_arriving.incomplete] == [("inf-0", 2)]
    pool = arrived.pool("inference")
    assert pool is not None and pool.largest_gpus() == Largest(Decimal(4), "inf-0")
    assert arrived.incomplete == ()


def test_devices_of_other_drivers_and_of_other_types_are_not_gpus(policy: Policy) -> None:
    channel = DeviceFacts("channel-0", {"type": "channel"})
    no_profile = DeviceFacts("mig-x", {"type": "mig", "productName": A100_40})
    inventory = Inventory(
        nodes=(node("inf-0", "inference"),),
        resource_slices=(
            published("inf-0", [channel, no_profile]),
            published("inf-0", gpus(8), driver="gpu.example.com"),
        ),
    )

    now = dra_now(policy, inventory)

    assert now.nodes == {} and now.pools == {}


def test_cordoned_unknown_and_unpooled_nodes_are_listed_but_count_for_no_pool(
    policy: Policy,
) -> None:
    inventory = Inventory(
        nodes=(node("cordoned", "inference", schedulable=False), node("cpu-0", None)),
        resource_slices=(
            published("cordoned", gpus(8)),
            published("cpu-0", gpus(1)),
            published("not-registered", gpus(2)),
        ),
    )

    now = dra_now(policy, inventory)

    assert now.pools == {}
    assert set(now.nodes) == {"cordoned", "cpu-0", "not-registered"}
    assert now.nodes["cordoned"].pool == "inference"
    assert not now.nodes["cordoned"].schedulable
    assert now.nodes["cpu-0"].pool is None
    assert now.nodes["not-registered"].pool is None


def test_devices_of_a_multi_node_slice_count_on_their_own_nodes(policy: Policy) -> None:
    devices = (
        DeviceFacts("gpu-0", {"type": "gpu", "productName": A100_40}, node="inf-0"),
        DeviceFacts("gpu-1", {"type": "gpu", "productName": A100_40}),
    )
    shared = ResourceSliceFacts("shared", DRIVER, "rack-1", 1, 1, None, devices)

    now = dra_now(policy, Inventory(nodes=(node("inf-0", "inference"),), resource_slices=(shared,)))

    assert set(now.nodes) == {"inf-0"}
    assert now.nodes["inf-0"].gpu_count() == 1


def test_a_policy_attribute_in_another_domain_is_read_there() -> None:
    text = default_policy_text().replace(
        "\nclasses:\n",
        "\ndra:\n  attributes:\n    productName: example.com/product\n\nclasses:\n",
        1,
    )
    policy = load_policy_text(text, "dra.yaml")
    device = DeviceFacts("gpu-0", {"type": "gpu", "example.com/product": V100})
    inventory = Inventory(
        nodes=(node("train-0", "training"),),
        resource_slices=(published("train-0", [device]),),
    )

    assert dra_now(policy, inventory).nodes["train-0"].gpus == {"V100": 1}


@pytest.mark.parametrize(
    ("product", "model"),
    [
        (A100_80, "A100"),
        ("NVIDIA-A100-SXM4-80GB", "A100"),
        ("A100-SXM4-80GB", "A100"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("V100", "V100"),
        ("NVIDIA A100-SXM4-40GB", None),
        ("XA100-SXM4-80GB", None),
    ],
)
def test_a_product_names_the_model_whose_product_it_ends_with(
    policy: Policy, product: str, model: str | None
) -> None:
    assert policy.pools["training"].model_of_product(product) == model


def test_the_clusters_other_device_classes_of_the_gpu_drivers_are_gpu_classes(
    policy: Policy,
) -> None:
    classes = {
        "gpu.nvidia.com": DeviceClassFacts("gpu.nvidia.com", ("device.driver == 'gpu.nvidia.com'",)),
        "a100.example.com": DeviceClassFacts("a100.example.com", ('device.driver == "gpu.nvidia.com"',)),
        "small.example.com": DeviceClassFacts("small.example.com", ("device.attributes['gpu.nvidia.com'].type == 'mig'",)),
        "nic.example.com": DeviceClassFacts("nic.example.com", ("device.driver == 'nic.example.com'",)),
        "channel.example.com": DeviceClassFacts("channel.example.com", ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'channel'",)),
    }  # fmt: skip

    found = gpu_device_classes(policy, Inventory(device_classes=classes))

    assert found.others == {"a100.example.com": "gpu", "small.example.com": "mig"}
    assert found.kind_of("gpu.nvidia.com") == "gpu" and found.kind_of("nic.example.com") is None
    assert dra_now(policy, Inventory(device_classes=classes)).gpu_classes == found


def test_the_one_view_of_gpu_classes_is_the_policys_alone_without_an_inventory(
    policy: Policy,
) -> None:
    view = UNKNOWN.classes_for(policy)

    assert view.others == {} and view.kind_of("mig.nvidia.com") == "mig"
    assert dra_now(policy, Inventory()).classes_for(policy) == view
