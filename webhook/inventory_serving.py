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

from webhook.engine.capacity_now import MIG_STRATEGY_LABEL, PRODUCT_LABEL
from webhook.engine.inventory import Inventory
from webhook.kube_inventory import InventoryStatus
from webhook.kube_reflector import KindStatus
from webhook.policy import Policy


def inventory_readiness(
    status: InventoryStatus, inventory: Inventory, policy: Policy
) -> tuple[bool, str]:
    parts = [_kind(status.nodes, "the policy's static node figures apply")]
    parts.append(_kind(status.priority_classes, "the policy's priority values apply"))
    if inventory.priority_classes is not None:
        missing = sorted(
            {
                c.priority_class.name
                for c in policy.classes.values()
                if c.priority_class.name not in inventory.priority_classes
            }
        )
        if missing:
            parts.append(
                "PriorityClasses the policy names but the cluster lacks (their pods are "
                f"refused): {', '.join(missing)}"
            )
    return True, "; ".join(parts)


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
