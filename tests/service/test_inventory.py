"""What /readyz says of the live inventory (webhook.service.inventory.py)."""

from __future__ import annotations

import logging
import time

import pytest

from webhook.engine.inventory import UNKNOWN, DeviceClassFacts, Inventory, PriorityClassFacts
from webhook.kube.inventory import InventoryStatus, KindStatus
from webhook.policy import Policy, load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text
from webhook.service.inventory import (
    MissingClassReport,
    inventory_label_keys,
    inventory_options,
    inventory_readiness,
    missing_device_classes,
    takes_dra_gpus,
)


def kind_status(
    kind: str, *, objects: int = 0, ago: float | None, error: str | None = None
) -> KindStatus:
    return KindStatus(
        kind=kind,
        synced=ago is not None,
        objects=objects,
        current_at=None if ago is None else time.monotonic() - ago,
        resource_version=None if ago is None else "42",
        lists=0 if ago is None else 1,
        last_error=error,
    )


def test_before_the_first_sync_it_is_unready_and_says_why_and_what_serves_if_called() -> None:
    status = InventoryStatus(
        kind_status("nodes", ago=None, error="connection refused"),
        kind_status("priorityclasses", ago=None, error="connection refused"),
    )

    ready, detail = inventory_readiness(status, UNKNOWN, load_default_policy())

    assert not ready
    assert detail.startswith("unready until the inventory has listed each kind once")
    assert "nodes: not synced yet, the policy's static node figures apply" in detail
    assert "(last error: connection refused)" in detail
    assert "priorityclasses: not synced yet, the policy's priority values apply" in detail


def test_one_kind_listed_and_another_not_yet_is_still_unready() -> None:
    status = InventoryStatus(
        kind_status("nodes", objects=9, ago=1.0),
        kind_status("priorityclasses", ago=None, error="forbidden"),
    )

    ready, detail = inventory_readiness(status, UNKNOWN, load_default_policy())

    assert not ready
    assert "priorityclasses: not synced yet" in detail


def test_once_synced_falling_behind_keeps_it_ready_on_the_last_known_cluster() -> None:
    status = InventoryStatus(
        kind_status("nodes", objects=9, ago=600.0, error="connection refused"),
        kind_status("priorityclasses", objects=4, ago=600.0, error="connection refused"),
    )

    ready, detail = inventory_readiness(status, UNKNOWN, load_default_policy())

    assert ready
    assert "nodes: 9 known, current 600s ago (last error: connection refused)" in detail


def test_once_synced_it_says_how_many_objects_and_how_current() -> None:
    status = InventoryStatus(
        kind_status("nodes", objects=9, ago=3.2),
        kind_status("priorityclasses", objects=4, ago=1.0),
    )
    classes = {
        name: PriorityClassFacts(name, 1, None)
        for name in ("inference-priority", "training-priority")
    }

    ready, detail = inventory_readiness(
        status, Inventory(nodes=(), priority_classes=classes), load_default_policy()
    )

    assert ready
    assert detail == "nodes: 9 known, current 3s ago; priorityclasses: 4 known, current 1s ago"


def test_priority_classes_the_policy_names_but_the_cluster_lacks_are_listed() -> None:
    status = InventoryStatus(
        kind_status("nodes", objects=0, ago=0.0), kind_status("priorityclasses", ago=0.0)
    )

    ready, detail = inventory_readiness(
        status, Inventory(nodes=(), priority_classes={}), load_default_policy()
    )

    assert ready
    assert detail.endswith(
        "PriorityClasses the policy names but the cluster lacks (their pods are refused): "
        "inference-priority, training-priority"
    )


def test_the_inventory_keeps_the_labels_decisions_read_and_no_others() -> None:
    assert inventory_label_keys(load_default_policy()) == {
        "gpu-pool",
        "nvidia-gpu-model",
        "nvidia.com/gpu.product",
        "nvidia.com/mig.strategy",
        "nvidia.com/gpu.present",
    }


def test_missing_priority_classes_are_logged_once_each_time_they_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = load_default_policy()
    report = MissingClassReport(lambda: policy)
    training = {"training-priority": PriorityClassFacts("training-priority", 1000, None)}
    both = {**training, "inference-priority": PriorityClassFacts("inference-priority", 1, None)}

    with caplog.at_level(logging.INFO, logger="gpu_admission.inventory"):
        report(Inventory(priority_classes=training))
        report(Inventory(priority_classes=training))
        report(Inventory(priority_classes=both))
        report(UNKNOWN)

    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "PriorityClasses the policy names do not exist; their pods are refused"),
        ("INFO", "every PriorityClass the policy names exists"),
    ]
    assert caplog.records[0].priority_classes == ["inference-priority"]  # type: ignore[attr-defined]


def dra_policy() -> Policy:
    text = default_policy_text().replace("gpusThrough: devicePlugin", "gpusThrough: dra", 1)
    return load_policy_text(text, "dra.yaml")


def test_a_policy_without_dra_pools_watches_no_resource_slices() -> None:
    options = inventory_options(load_default_policy())

    assert set(options) == {"node_label_keys"}
    assert not takes_dra_gpus(load_default_policy())


def test_a_dra_pool_watches_the_slices_of_its_drivers_keeping_the_attributes_it_reads() -> None:
    options = inventory_options(dra_policy())

    assert options["dra"] is True
    assert options["dra_drivers"] == {"gpu.nvidia.com"}
    assert options["device_attributes"] == {"type", "productName", "profile"}
    assert "gpu-pool" in options["node_label_keys"]


def test_resource_slices_and_device_classes_are_reported_and_awaited_like_the_others() -> None:
    status = InventoryStatus(
        kind_status("nodes", objects=9, ago=3.2),
        kind_status("priorityclasses", objects=2, ago=1.0),
        kind_status("resourceslices", ago=None, error="403 Forbidden"),
        kind_status("deviceclasses", objects=2, ago=0.0),
    )

    ready, detail = inventory_readiness(status, UNKNOWN, dra_policy())

    assert not ready
    assert (
        "resourceslices: not synced yet, the policy's figures apply to DRA pools "
        "(last error: 403 Forbidden)"
    ) in detail
    assert "deviceclasses: 2 known, current 0s ago" in detail
    assert [kind.kind for kind in status.kinds()] == [
        "nodes",
        "priorityclasses",
        "resourceslices",
        "deviceclasses",
    ]
    assert not status.synced


def test_gpu_device_classes_the_policy_names_but_the_cluster_lacks_are_listed() -> None:
    status = InventoryStatus(
        kind_status("nodes", ago=0.0),
        kind_status("priorityclasses", ago=0.0),
        kind_status("resourceslices", ago=0.0),
        kind_status("deviceclasses", objects=1, ago=0.0),
    )
    inventory = Inventory(
        priority_classes={
            name: PriorityClassFacts(name, 1, None)
            for name in ("inference-priority", "training-priority")
        },
        device_classes={"gpu.nvidia.com": DeviceClassFacts("gpu.nvidia.com")},
    )

    _, detail = inventory_readiness(status, inventory, dra_policy())
    _, without_dra = inventory_readiness(status, inventory, load_default_policy())

    assert detail.endswith(
        "GPU DeviceClasses the policy names but the cluster lacks: mig.nvidia.com"
    )
    assert "DeviceClasses the policy names" not in without_dra
    assert missing_device_classes(inventory, dra_policy()) == ["mig.nvidia.com"]
    assert missing_device_classes(Inventory(), dra_policy()) == []
