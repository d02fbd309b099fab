"""How the service uses the live inventory: which Node labels it keeps, whether it
watches ResourceSlices and DeviceClasses and what of them it keeps, and what ``/readyz``
says of it.

A replica is unready until every kind it watches has been listed once: before that
it knows nothing of the cluster and would judge by the policy's static figures where
its peers judge by the nodes, so kube-apiserver (through the Service's endpoints) sends
to the peers that can. A replica that cannot list at all (its RBAC, its network) stays
unready and its ``/readyz`` says why; a rolling upgrade stops there instead of
replacing replicas that judge with ones that cannot. Once synced, falling behind never
makes it unready again: the last known cluster still gives sound decisions, a watch
that fails for one replica fails for all of them, and taking every replica out would
fail every GPU review. Called anyway (a ``url`` clientConfig knows no readiness),
a replica that has not synced judges by the policy's static figures.

The detail says which figures serve, how current they are, and which PriorityClasses
the policy names that the cluster does not have (their pods are refused until an
operator creates them), and which GPU DeviceClasses the policy names that the cluster
does not have.

ResourceSlices and DeviceClasses are watched when the policy has a pool taking GPUs
through DRA (``gpusThrough: dra`` or ``both``): a cluster without ``resource.k8s.io/v1``
(before Kubernetes 1.34), or a service account without the rule, then costs nothing. As
with the label keys, a policy edit that adds the first DRA pool, or renames the drivers
or attributes, reaches the inventory at the next restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from webhook.engine.capacity.now import MIG_STRATEGY_LABEL, PRODUCT_LABEL
from webhook.engine.inventory import Inventory
from webhook.engine.seen_nodes import GPU_PRESENT_LABEL
from webhook.kube.inventory import InventoryStatus
from webhook.kube.reflector import KindStatus
from webhook.policy import Policy

log = logging.getLogger("gpu_admission.inventory")


UNSYNCED = (
    "unready until the inventory has listed each kind once (peers that have take the reviews)"
)


def inventory_readiness(
    status: InventoryStatus, inventory: Inventory, policy: Policy
) -> tuple[bool, str]:
    parts = [_kind(status.nodes, "the policy's static node figures apply")]
    parts.append(_kind(status.priority_classes, "the policy's priority values apply"))
    if status.resource_slices is not None:
        parts.append(_kind(status.resource_slices, "the policy's figures apply to DRA pools"))
    if status.device_classes is not None:
        parts.append(_kind(status.device_classes, "DeviceClasses are not known"))
    missing = missing_priority_classes(inventory, policy)
    if missing:
        parts.append(
            "PriorityClasses the policy names but the cluster lacks (their pods are "
            f"refused): {', '.join(missing)}"
        )
    absent = missing_device_classes(inventory, policy)
    if absent:
        parts.append(
            f"GPU DeviceClasses the policy names but the cluster lacks: {', '.join(absent)}"
        )
    if not status.synced:
        parts.insert(0, UNSYNCED)
    return status.synced, "; ".join(parts)


def missing_device_classes(inventory: Inventory, policy: Policy) -> list[str]:
    """The GPU and MIG DeviceClasses the policy names that the cluster is known not to
    have, when some pool of the policy takes GPUs through DRA."""
    if inventory.device_classes is None or not takes_dra_gpus(policy):
        return []
    known = inventory.device_classes
    return sorted(name for name in policy.dra.device_classes if name not in known)


def takes_dra_gpus(policy: Policy) -> bool:
    """Whether some pool of the policy takes GPUs through DRA."""
    return any(pool.takes_dra_gpus for pool in policy.pools.values())


def inventory_options(policy: Policy) -> dict[str, Any]:
    """The ``InventoryWatcher`` options the policy asks for: the Node labels kept, and
    with a DRA pool, the ResourceSlices of its drivers with the attributes it reads."""
    options: dict[str, Any] = {"node_label_keys": inventory_label_keys(policy)}
    if takes_dra_gpus(policy):
        options.update(
            dra=True,
            dra_drivers=policy.dra.drivers,
            device_attributes=policy.dra.attributes,
        )
    return options


def missing_priority_classes(inventory: Inventory, policy: Policy) -> list[str]:
    """The PriorityClasses the policy names that the cluster is known not to have."""
    if inventory.priority_classes is None:
        return []
    known = inventory.priority_classes
    names = {c.priority_class.name for c in policy.classes.values()}
    return sorted(name for name in names if name not in known)


class MissingClassReport:
    """Logs the PriorityClasses the policy names that the cluster lacks, once each time
    that set changes as seen at a new snapshot, so an operator sees it in the log as well
    as in ``/readyz`` and in the denials."""

    def __init__(self, policy: Callable[[], Policy]) -> None:
        self._policy = policy
        self._reported: list[str] = []

    def __call__(self, inventory: Inventory) -> None:
        missing = missing_priority_classes(inventory, self._policy())
        if missing == self._reported:
            return
        self._reported = missing
        if missing:
            log.warning(
                "PriorityClasses the policy names do not exist; their pods are refused",
                extra={"priority_classes": missing},
            )
        else:
            log.info("every PriorityClass the policy names exists")


def _kind(status: KindStatus, fallback: str) -> str:
    error = f" (last error: {status.last_error})" if status.last_error else ""
    age = status.age()
    if age is None:
        return f"{status.kind}: not synced yet, {fallback}{error}"
    return f"{status.kind}: {status.objects} known, current {age:.0f}s ago{error}"


def inventory_label_keys(policy: Policy) -> frozenset[str]:
    """The Node labels the inventory keeps: the policy's pool and model labels and GPU
    Feature Discovery's product, MIG strategy and ``nvidia.com/gpu.present`` (which tells
    a GPU node, see webhook.engine.seen_nodes). A policy edit that renames the pool or
    model label reaches the inventory at the next restart; until then pools are unknown
    to it and the policy's static figures apply."""
    return policy.node_label_keys | {PRODUCT_LABEL, MIG_STRATEGY_LABEL, GPU_PRESENT_LABEL}
