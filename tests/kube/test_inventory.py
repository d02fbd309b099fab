"""The parts of webhook.kube.inventory that need no cluster; the watcher itself is tested
against a real kube-apiserver in tests/e2e/test_inventory.py."""

from __future__ import annotations

import pytest
from kubernetes import client

from webhook.engine.inventory import Inventory
from webhook.kube.inventory import InventoryStatus, InventoryWatcher
from webhook.kube.reflector import KindStatus


def kind_status(synced: bool, current_at: float | None) -> KindStatus:
    return KindStatus("nodes", synced, 0, current_at, None, int(synced), None)


def test_inventory_status_is_synced_when_both_kinds_are() -> None:
    assert InventoryStatus(kind_status(True, 1.0), kind_status(True, 1.0)).synced
    assert not InventoryStatus(kind_status(True, 1.0), kind_status(False, None)).synced


def test_a_watcher_not_started_knows_nothing() -> None:
    watcher = InventoryWatcher(client.ApiClient())
    assert watcher.current == Inventory(nodes=None, priority_classes=None)
    status = watcher.status()
    assert not status.synced
    assert (status.nodes.kind, status.priority_classes.kind) == ("nodes", "priorityclasses")
    assert watcher.sync_age_seconds() == {"nodes": None, "priorityclasses": None}
    assert not watcher.running
    watcher.stop()  # harmless when never started


def test_watch_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="watch_timeout_seconds"):
        InventoryWatcher(client.ApiClient(), watch_timeout_seconds=0)


def test_a_watcher_watches_resource_slices_and_device_classes_only_when_asked() -> None:
    plain = InventoryWatcher(client.ApiClient())
    dra = InventoryWatcher(client.ApiClient(), dra=True, dra_drivers=["gpu.nvidia.com"])

    assert not plain.watches_dra
    assert plain.status().resource_slices is None
    assert dra.watches_dra
    status = dra.status()
    assert status.resource_slices is not None and status.device_classes is not None
    assert [kind.kind for kind in status.kinds()] == [
        "nodes",
        "priorityclasses",
        "resourceslices",
        "deviceclasses",
    ]
    assert dra.sync_age_seconds() == {
        "nodes": None,
        "priorityclasses": None,
        "resourceslices": None,
        "deviceclasses": None,
    }
    assert dra.current == Inventory()
