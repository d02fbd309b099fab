"""Kueue's ResourceFlavors as the policy's pools call for them, and what a flavor in the
cluster says that the policy contradicts.

Kueue assigns a workload a flavor before any of its pods exists, by the templates' node
affinity and tolerations against the flavor's ``nodeLabels`` and ``nodeTaints``, then
writes the flavor's node labels (and its ``tolerations``) into the templates as it
unsuspends the workload. A flavor of a GPU pool must therefore say what the pool's nodes
say: their pool label and their taints. Kept that way, only workloads whose templates
tolerate the pool (those of the pool's classes, once ``mutate-workloads`` gave them the
class's tolerations) are ever assigned it; every other workload is left pending by Kueue
with Kueue's own reason, never charged the pool's quota while its pods are refused.

Flavor ``tolerations`` of a pool's taint undo that: Kueue would add them to every
workload it admits there, a CPU job's and another class's included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.placement import BLOCKING_EFFECTS, tolerates
from webhook.policy.compiled import Policy, Pool, Taint

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
"""The version of Kueue's API the flavors are written in (v0.17 stores v1beta2)."""
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "ResourceFlavor"
RESOURCE = "resourceflavors"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-admission"}


def pool_flavors(policy: Policy) -> list[dict[str, Any]]:
    """One ResourceFlavor per pool of the policy, named as the pool: its nodes' pool label
    and taints, no tolerations."""
    return [_flavor(policy, pool) for pool in policy.pools.values()]


def _flavor(policy: Policy, pool: Pool) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {policy.pool_label: pool.label_value}}
    if pool.taints:
        spec["nodeTaints"] = [_taint(taint) for taint in pool.taints]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": pool.name, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def _taint(taint: Taint) -> dict[str, str]:
    found = {"key": taint.key, "value": taint.value, "effect": taint.effect}
    return {k: v for k, v in found.items() if v}


def classes_of_pool(policy: Policy, pool: Pool) -> list[str]:
    """The workload classes whose pods may run in `pool`, in policy order."""
    return [c.name for c in policy.classes.values() if pool.name in c.pools]


def flavor_contradictions(policy: Policy, flavor: Mapping[str, Any]) -> list[str]:
    """What a ResourceFlavor of the cluster says that the policy's pools contradict, each
    in a sentence that says what Kueue will do of it; empty for a flavor of no GPU pool."""
    spec = flavor.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    labels = _mapping(spec.get("nodeLabels"))
    tolerations = [t for t in _list(spec.get("tolerations")) if isinstance(t, Mapping)]
    found = [
        f"its tolerations tolerate the taint {taint.describe()} of pool {pool.name}: Kueue "
        "adds them to every workload it admits with this flavor, of any class or none, and "
        "the pods of those not of the pool's classes are refused"
        for pool in policy.pools.values()
        for taint in pool.taints
        if taint.effect in BLOCKING_EFFECTS and any(tolerates(t, taint) for t in tolerations)
    ]
    value = labels.get(policy.pool_label)
    if value is None:
        return found
    pool = next((p for p in policy.pools.values() if p.label_value == value), None)
    if pool is None:
        found.append(
            f"its nodeLabels select {policy.pool_label}={value}, a pool the policy does not "
            f"name (pools: {', '.join(p.label_value for p in policy.pools.values())})"
        )
        return found
    return found + _pool_contradictions(policy, pool, labels, _list(spec.get("nodeTaints")))


def _pool_contradictions(
    policy: Policy, pool: Pool, labels: Mapping[str, Any], node_taints: list[Any]
) -> list[str]:
    found = []
    declared = {
        (t.get("key"), t.get("value") or "", t.get("effect"))
        for t in node_taints
        if isinstance(t, Mapping)
    }
    for taint in pool.taints:
        if (taint.key, taint.value, taint.effect) not in declared:
            found.append(
                f"it selects pool {pool.name} but its nodeTaints lack the pool's taint "
                f"{taint.describe()}: Kueue assigns it to workloads that do not tolerate the "
                "pool, whose pods can never run there"
            )
    model = labels.get(policy.model_label)
    if isinstance(model, str) and pool.model_of_product(model) is None:
        found.append(
            f"its nodeLabels select {policy.model_label}={model}, a model pool {pool.name} "
            f"does not have (models: {', '.join(pool.models)})"
        )
    return found


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
