"""How the service uses the live inventory: which Node labels it keeps, and what
``/readyz`` says of it.

The inventory never makes the replica unready: until it syncs, and whenever it
falls behind, the policy's static figures or the last known cluster still give
sound decisions, and taking every replica out would fail every review. The detail
says which figures serve, how current they are, and which PriorityClasses the
policy names that the cluster does not have (their pods are refused until an
operator creates them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from webhook.engine.capacity_now import MIG_STRATEGY_LABEL, PRODUCT_LABEL
from webhook.engine.inventory import Inventory
from webhook.kube.inventory import InventoryStatus
from webhook.kube.reflector import KindStatus
from webhook.policy import Policy

log = logging.getLogger("gpu_admission.inventory")


def inventory_readiness(
    status: InventoryStatus, inventory: Inventory, policy: Policy
) -> tuple[bool, str]:
    parts = [_kind(status.nodes, "the policy's static node figures apply")]
    parts.append(_kind(status.priority_classes, "the policy's priority values apply"))
    missing = missing_priority_classes(inventory, policy)
    if missing:
        parts.append(
            "PriorityClasses the policy names but the cluster lacks (their pods are "
            f"refused): {', '.join(missing)}"
        )
    return True, "; ".join(parts)


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
    Feature Discovery's product and MIG strategy. A policy edit that renames the pool or
    model label reaches the inventory at the next restart; until then pools are unknown
    to it and the policy's static figures apply."""
    return policy.node_label_keys | {PRODUCT_LABEL, MIG_STRATEGY_LABEL}
