"""Policies that say two things no cluster can hold at once: a class whose default GPU
count no node of its pools has, two classes giving one PriorityClass different values,
a PriorityClass name Kubernetes keeps for its own, one label key read for two meanings,
two taints of a pool with the same key and effect.

Each field is valid on its own (pydantic has passed it, or reports it); together they
describe a policy that loads and then refuses every pod of a class, or that
``install`` cannot apply. Like ``webhook.policy.references`` the checks read the data
as the YAML gave it and pass over whatever is not shaped as the model wants, so that
every problem is reported at once; each is a field path and a reason saying what
would be accepted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeGuard

from webhook.policy.model import NodeLabels, PodLabels
from webhook.policy.references import Found

SYSTEM_PRIORITY_PREFIX = "system-"
"""Kubernetes refuses a PriorityClass of this prefix unless it is one of its own
(system-cluster-critical, system-node-critical), whose values no policy may give."""


def contradiction_problems(data: dict[str, Any]) -> list[Found]:
    """Every contradiction between fields of a policy's data."""
    pools = _mapping(data.get("pools"))
    classes = _mapping(data.get("classes"))
    found = list(_default_gpu_problems(classes, pools))
    found += _priority_class_problems(classes)
    found += _label_key_problems(
        "podLabels", _mapping(data.get("podLabels")), PodLabels().model_dump(by_alias=True)
    )
    found += _label_key_problems(
        "nodeLabels", _mapping(data.get("nodeLabels")), NodeLabels().model_dump(by_alias=True)
    )
    found += _taint_problems(pools)
    return found


def most_gpus_per_node(pool: dict[Any, Any]) -> int | None:
    """The most GPUs a node of `pool` has: its gpusPerNode, or a model's own if larger;
    None when the pool gives no whole number."""
    counts = [pool.get("gpusPerNode")]
    counts += [
        m.get("gpusPerNode") for m in _mapping(pool.get("models")).values() if isinstance(m, dict)
    ]
    # A count below 1 is refused by the model; it says nothing of the nodes.
    whole = [count for count in counts if _whole(count) and count >= 1]
    return max(whole) if whole else None


def _default_gpu_problems(classes: dict[Any, Any], pools: dict[Any, Any]) -> Iterator[Found]:
    for name, workload in classes.items():
        if not isinstance(workload, dict):
            continue
        default = workload.get("defaultGpus", 1)
        if not _whole(default):
            continue
        largest = _largest_node(_list(workload.get("pools")), pools)
        if largest is not None and default > largest[0]:
            most, pool_name = largest
            yield (
                ("classes", name, "defaultGpus"),
                f"{default} GPUs per pod, but a node of the class's pools has at most {most} "
                f"(pool {pool_name!r}): every pod given this default would be refused; "
                f"write at most {most}",
            )


def _largest_node(names: list[Any], pools: dict[Any, Any]) -> tuple[int, str] | None:
    """The most GPUs a node of the named pools that take the device plugin's GPUs has, and
    its pool: the default is injected as the device plugin's resource, and only for such
    pools (webhook.engine.mutate). None when no pool takes them, or when a pool is unknown
    or gives no whole number (reported elsewhere)."""
    largest: tuple[int, str] | None = None
    for name in names:
        pool = pools.get(name) if isinstance(name, str) else None
        most = most_gpus_per_node(pool) if isinstance(pool, dict) else None
        if most is None or not isinstance(pool, dict):
            return None
        if pool.get("gpusThrough", "devicePlugin") == "dra":
            continue
        if largest is None or most > largest[0]:
            largest = (most, name)
    return largest


def _priority_class_problems(classes: dict[Any, Any]) -> Iterator[Found]:
    first: dict[str, tuple[str, dict[Any, Any]]] = {}
    for name, workload in classes.items():
        priority = workload.get("priorityClass") if isinstance(workload, dict) else None
        if not isinstance(priority, dict) or not isinstance(priority.get("name"), str):
            continue
        class_name: str = priority["name"]
        if class_name.startswith(SYSTEM_PRIORITY_PREFIX):
            yield (
                ("classes", name, "priorityClass", "name"),
                f"PriorityClass names starting with {SYSTEM_PRIORITY_PREFIX!r} are kept for "
                "Kubernetes' own classes; choose another name",
            )
        if class_name not in first:
            first[class_name] = (str(name), priority)
            continue
        other, seen = first[class_name]
        for field, default in (("value", None), ("preemptionPolicy", "PreemptLowerPriority")):
            mine, theirs = priority.get(field, default), seen.get(field, default)
            if mine != theirs:
                yield (
                    ("classes", name, "priorityClass", field),
                    f"PriorityClass {class_name!r} has one {field}: class {other!r} gives it "
                    f"{theirs}, this class {mine}; give both {theirs} or name another class",
                )


def _label_key_problems(
    section: str, labels: dict[Any, Any], defaults: dict[str, str]
) -> Iterator[Found]:
    """Two meanings read from one label key: a pod's workload class and its GPU model,
    or a node's pool and its GPU model."""
    meanings = list(defaults)
    keys = {meaning: labels.get(meaning, defaults[meaning]) for meaning in meanings}
    first, second = meanings
    if isinstance(keys[first], str) and keys[first] == keys[second]:
        yield (
            (section, second),
            f"{section}.{first} is {keys[first]!r} too; one label cannot name both the "
            f"{first} and the {second}: give each its own key",
        )


def _taint_problems(pools: dict[Any, Any]) -> Iterator[Found]:
    """Kubernetes refuses a node with two taints of one key and effect."""
    for name, pool in pools.items():
        taints = _list(pool.get("taints")) if isinstance(pool, dict) else []
        seen: set[tuple[str, str]] = set()
        for index, taint in enumerate(taints):
            if not isinstance(taint, dict) or not isinstance(taint.get("key"), str):
                continue
            effect = taint.get("effect", "NoSchedule")
            if (taint["key"], effect) in seen:
                yield (
                    ("pools", name, "taints", index),
                    f"a node has one taint of key {taint['key']!r} and effect {effect}; "
                    "Kubernetes refuses a second: keep one",
                )
            seen.add((taint["key"], effect))


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
