"""Reading ResourceSlices and DeviceClasses into inventory facts, and which slices count
now: the newest complete generation of each driver's pool (webhook/engine/dra/resource_slices.py)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.dra.resource_slices import (
    current_slices,
    device_class_facts,
    resource_slice_facts,
)
from webhook.engine.inventory import DeviceFacts, ResourceSliceFacts

DRIVER = "gpu.nvidia.com"


def gpu(name: str, product: str = "NVIDIA A100-SXM4-40GB", **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": product},
            "architecture": {"string": "Ampere"},
            "cudaComputeCapability": {"version": "8.0.0"},
            "index": {"int": 0},
            "gpu.nvidia.com/addressingMode": {"string": "None"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
        },
        "capacity": {"memory": {"value": "40Gi"}},
        **more,
    }


def slice_object(
    name: str = "node-a-gpu.nvidia.com-x7k2p",
    *,
    node: str | None = "node-a",
    pool: str = "node-a",
    generation: Any = 1,
    count: Any = 1,
    devices: list[dict[str, Any]] | None = None,
    driver: Any = DRIVER,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": devices if devices is not None else [gpu("gpu-0"), gpu("gpu-1")],
    }
    if node is not None:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_a_slice_keeps_its_driver_pool_generation_node_and_devices() -> None:
    facts = resource_slice_facts(slice_object(generation=3))

    assert facts is not None
    assert (facts.name, facts.driver, facts.pool) == (
        "node-a-gpu.nvidia.com-x7k2p",
        DRIVER,
        "node-a",
    )
    assert (facts.generation, facts.slice_count, facts.node) == (3, 1, "node-a")
    assert [device.name for device in facts.devices] == ["gpu-0", "gpu-1"]
    attributes = facts.devices[0].attributes
    assert attributes["productName"] == "NVIDIA A100-SXM4-40GB"
    assert attributes["cudaComputeCapability"] == "8.0.0"
    assert attributes["index"] == 0


def test_only_the_attributes_asked_for_are_kept_those_of_the_drivers_domain_bare() -> None:
    facts = resource_slice_facts(
        slice_object(),
        attributes=["type", "gpu.nvidia.com/productName", "gpu.nvidia.com/addressingMode"],
    )

    assert facts is not None
    assert facts.devices[0].attributes == {
        "type": "gpu",
        "productName": "NVIDIA A100-SXM4-40GB",
        "addressingMode": "None",
    }
    device = facts.devices[0]
    assert facts.attribute(device, "productName") == "NVIDIA A100-SXM4-40GB"
    assert facts.attribute(device, "gpu.nvidia.com/productName") == "NVIDIA A100-SXM4-40GB"
    assert facts.attribute(device, "resource.kubernetes.io/pcieRoot") is None


def test_an_attribute_of_another_domain_keeps_its_domain() -> None:
    facts = resource_slice_facts(slice_object(), attributes=["resource.kubernetes.io/pcieRoot"])

    assert facts is not None
    assert facts.devices[0].attributes == {"resource.kubernetes.io/pcieRoot": "pci0000:00"}


def test_slices_of_other_drivers_are_not_kept_when_drivers_are_named() -> None:
    nic = slice_object(driver="net.example.com")

    assert resource_slice_facts(nic, drivers=[DRIVER]) is None
    assert resource_slice_facts(nic) is not None


def test_a_slice_of_several_nodes_has_no_node_and_a_device_may_name_its_own() -> None:
    facts = resource_slice_facts(
        slice_object(node=None, devices=[gpu("gpu-0", nodeName="node-b"), gpu("gpu-1")])
    )

    assert facts is not None and facts.node is None
    assert [facts.node_of(d) for d in facts.devices] == ["node-b", None]


@pytest.mark.parametrize(
    "broken",
    [
        None,
        [],
        {"metadata": {}},
        slice_object(driver=""),
        slice_object(pool=""),
        slice_object(generation="1"),
        slice_object(generation=-1),
        slice_object(generation=True),
        slice_object(count=0),
        slice_object(count=None),
    ],
)
def test_a_slice_shaped_wrongly_is_not_kept(broken: Any) -> None:
    assert resource_slice_facts(broken) is None


def test_odd_devices_and_attributes_are_dropped_not_raised() -> None:
    devices: list[Any] = [
        "gpu-0",
        {"attributes": {}},
        {
            "name": "gpu-2",
            "attributes": {
                "type": {"string": "gpu"},
                "odd": {"quantity": "1"},
                "flag": {"bool": True},
                "count": {"int": True},
                7: {"string": "x"},
            },
        },
    ]

    facts = resource_slice_facts(slice_object(devices=devices))

    assert facts is not None
    assert facts.devices == (DeviceFacts("gpu-2", {"type": "gpu", "flag": True}),)


def test_a_device_class_keeps_its_cel_selectors() -> None:
    expression = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"  # fmt: skip
    facts = device_class_facts(
        {
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": expression}}, {"other": {}}]},
        }
    )

    assert facts is not None
    assert (facts.name, facts.selectors) == ("gpu.nvidia.com", (expression,))
    assert device_class_facts({"metadata": {}}) is None
    assert device_class_facts({"metadata": {"name": "x"}, "spec": {"selectors": "no"}}) is not None


def piece(
    name: str, generation: int, count: int = 1, pool: str = "node-a", driver: str = DRIVER
) -> ResourceSliceFacts:
    return ResourceSliceFacts(name, driver, pool, generation, count, "node-a")


def names(slices: tuple[ResourceSliceFacts, ...]) -> list[str]:
    return [s.name for s in slices]


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    current = current_slices([piece("old", 1), piece("new", 2)])

    assert names(current.slices) == ["new"]
    assert current.incomplete == ()


def test_a_generation_counts_once_all_its_slices_are_there() -> None:
    arriving = current_slices([piece("old", 1), piece("new-0", 2, count=2)])
    arrived = current_slices([piece("old", 1), piece("new-0", 2, count=2), piece("new-1", 2, 2)])

    assert arriving.slices == ()
    [pool] = arriving.incomplete
    assert (pool.driver, pool.pool, pool.generation, pool.slices) == (
        DRIVER,
        "node-a",
        2,
        ("new-0",),
    )
    assert (pool.slice_count, pool.complete) == (2, False)
    assert names(arrived.slices) == ["new-0", "new-1"]
    assert arrived.incomplete == ()


def test_slices_disagreeing_on_their_count_are_not_complete() -> None:
    current = current_slices([piece("a", 1, count=2), piece("b", 1, count=3)])

    assert current.slices == ()
    assert current.incomplete[0].slice_count == 3


def test_pools_are_told_apart_by_driver_and_name() -> None:
    current = current_slices(
        [
            piece("a", 5, pool="node-a"),
            piece("b", 1, pool="node-b"),
            piece("c", 1, pool="node-a", driver="gpu.example.com"),
        ]
    )

    assert names(current.slices) == ["a", "b", "c"]
