"""What /readyz says of the live inventory (webhook.service.inventory.py)."""

from __future__ import annotations

import logging
import time

import pytest

from webhook.engine.inventory import UNKNOWN, Inventory, PriorityClassFacts
from webhook.kube.inventory import InventoryStatus, KindStatus
from webhook.policy import load_default_policy
from webhook.service.inventory import (
    MissingClassReport,
    inventory_label_keys,
    inventory_readiness,
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


def test_before_the_first_sync_it_stays_ready_and_says_static_figures_apply() -> None:
    status = InventoryStatus(
        kind_status("nodes", ago=None, error="connection refused"),
        kind_status("priorityclasses", ago=None, error="connection refused"),
    )

    ready, detail = inventory_readiness(status, UNKNOWN, load_default_policy())

    assert ready
    assert "nodes: not synced yet, the policy's static node figures apply" in detail
    assert "(last error: connection refused)" in detail
    assert "priorityclasses: not synced yet, the policy's priority values apply" in detail


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
