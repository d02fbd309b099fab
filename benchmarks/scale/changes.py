"""What one change of the live inventory costs a replica, in one process, at fleet scale.

`python -m benchmarks.scale.changes [--nodes 5000] [--steps 40]` builds the inventory a
replica holds of the fleet ``benchmarks.scale`` creates (GPU nodes labelled as GPU Feature
Discovery labels them, each with NVIDIA's ResourceSlice; the scale policy), the way the
live inventory builds it, then changes one node's allocatable GPUs per step, as the churn
of ``benchmarks.scale`` does, and times:

- the nodes' snapshot the watch publishes: made whole, names sorted (what each change
  cost before), and with the changed node put at its place (``NameOrdered``);
- the pools' capacity worked out from nothing (``capacity_now``: what the first sync
  costs, and what every change cost before capacity was followed);
- the same followed from the last inventory (``CapacityTracker``: what a change costs
  the event loop now), told what changed as the live inventory tells it, and finding it
  by a pass over every node's identity (what it cost before);
- handing the new inventory to the review worker: pickled whole (what each large review
  after a change cost before), and as what changed (``webhook.http.inventory_updates``),
  made, pickled, and rebuilt on the worker's side.

No kube-apiserver: what it measures is the replica's own work per change. Prints a table;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import gc
import pickle
import statistics
import time
from collections.abc import Callable
from decimal import Decimal

from benchmarks.common.report import markdown_table
from benchmarks.scale import fleet
from webhook.engine.capacity.now import CapacityTracker, capacity_now
from webhook.engine.dra.resource_slices import device_class_facts, resource_slice_facts
from webhook.engine.inventory import (
    Inventory,
    NodeFacts,
    NodesChanged,
    node_facts,
    priority_class_facts,
)
from webhook.http.inventory_updates import applied, update_from
from webhook.kube.frozen_views import NameOrdered
from webhook.policy import Policy, load_policy_text
from webhook.service.inventory import inventory_label_keys

GPU = "nvidia.com/gpu"


def fleet_inventory(policy: Policy, nodes: int) -> Inventory:
    """The inventory a replica holds of ``nodes`` nodes of the fleet and their slices."""
    now = datetime.datetime.now(datetime.UTC)
    keys = inventory_label_keys(policy)
    node_list = [node_facts(fleet.node_object(index, now), keys) for index in range(nodes)]
    slices = [
        resource_slice_facts(
            fleet.resource_slice(index),
            drivers=policy.dra.drivers,
            attributes=policy.dra.attributes,
        )
        for index in range(nodes)
    ]
    classes = [device_class_facts(obj) for obj in fleet.device_classes()]
    priorities = [priority_class_facts(obj) for obj in fleet.priority_classes()]
    return Inventory(
        nodes=tuple(sorted((n for n in node_list if n is not None), key=lambda n: n.name)),
        priority_classes={p.name: p for p in priorities if p is not None},
        resource_slices=tuple(s for s in slices if s is not None),
        device_classes={c.name: c for c in classes if c is not None},
    )


def with_allocatable(inventory: Inventory, index: int, gpus: int) -> Inventory:
    """``inventory`` with node ``index``'s allocatable GPUs changed: a new facts object
    for that node, the others the same objects, and what changed told (as the live
    inventory publishes it)."""
    assert inventory.nodes is not None
    node: NodeFacts = inventory.nodes[index]
    changed = dataclasses.replace(node, allocatable={**node.allocatable, GPU: Decimal(gpus)})
    nodes = (*inventory.nodes[:index], changed, *inventory.nodes[index + 1 :])
    told = NodesChanged(inventory.nodes, nodes, (index,))
    return dataclasses.replace(inventory, nodes=nodes, nodes_changed=told)


def timed(work: Callable[[], object]) -> float:
    """Milliseconds ``work`` took."""
    started = time.perf_counter()
    work()
    return (time.perf_counter() - started) * 1000


def summary(samples: list[float]) -> str:
    return f"{statistics.median(samples):,.2f} / {max(samples):,.2f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale.changes", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=40, help="node changes, one at a time")
    args = parser.parse_args(argv)

    policy = load_policy_text(fleet.policy_text(), "scale policy")
    first = fleet_inventory(policy, args.nodes)
    print(f"{args.nodes:,} nodes, {len(first.resource_slices or ()):,} ResourceSlices")

    def round_trip() -> Inventory:
        copied = pickle.loads(pickle.dumps(first, pickle.HIGHEST_PROTOCOL))
        assert isinstance(copied, Inventory)
        return copied

    cold = [timed(lambda: capacity_now(policy, first)) for _ in range(3)]
    whole = [timed(round_trip) for _ in range(3)]
    tracker = CapacityTracker(policy)
    tracker.now(first)
    untold = CapacityTracker(policy)
    untold.now(first)
    passed: list[float] = []
    store = {node.name: node for node in first.nodes or ()}
    ordered: NameOrdered[NodeFacts] = NameOrdered()
    ordered.whole(store)
    sorted_whole: list[float] = []
    put_in_place: list[float] = []
    followed: list[float] = []
    handed: list[float] = []
    update_bytes: list[int] = []
    worker_held = (0, round_trip())
    sent_held = (0, first)
    inventory = first
    gc.collect()
    for step in range(1, args.steps + 1):
        index = (step * 97) % args.nodes
        inventory = with_allocatable(inventory, index, 8 - step % 3)
        assert inventory.nodes is not None
        store[inventory.nodes[index].name] = inventory.nodes[index]
        sorted_whole.append(timed(functools.partial(NameOrdered[NodeFacts]().whole, store)))
        put_in_place.append(
            timed(functools.partial(ordered.changed, store, inventory.nodes[index].name))
        )
        followed.append(timed(functools.partial(tracker.now, inventory)))
        without = dataclasses.replace(inventory, nodes_changed=None)
        passed.append(timed(functools.partial(untold.now, without)))
        started = time.perf_counter()
        data = pickle.dumps(update_from(sent_held, inventory, step), pickle.HIGHEST_PROTOCOL)
        update = pickle.loads(data)
        worker_held = (step, applied(worker_held, update))
        handed.append((time.perf_counter() - started) * 1000)
        update_bytes.append(len(data))
        sent_held = (step, inventory)
    assert worker_held[1] == inventory, "the worker's inventory is the one sent"
    assert tracker.now(inventory) == untold.now(inventory) == capacity_now(policy, inventory)

    changed = f"as what changed ({statistics.median(update_bytes):,.0f} bytes)"
    assert ordered.whole(store).items == inventory.nodes
    rows = [
        ["nodes' snapshot made whole, names sorted", summary(sorted_whole)],
        ["nodes' snapshot with the changed node put at its place", summary(put_in_place)],
        ["capacity worked out from nothing (`capacity_now`)", summary(cold)],
        ["capacity followed, found by a pass over every node", summary(passed)],
        ["capacity followed, told what changed (`CapacityTracker`)", summary(followed)],
        ["inventory to the review worker, pickled whole and unpickled", summary(whole)],
        [f"inventory to the review worker {changed}", summary(handed)],
    ]
    print(markdown_table(["per change of one node's allocatable", "ms, median / slowest"], rows))


if __name__ == "__main__":
    main()
