"""What a mutation injected, named in a few words, from its JSONPatch.

`check` says it on an object's one line (`allowed  Pod/ml/chat  pod.yaml:1  mutated:
affinity, tolerations, priority, gpu-limits`). The names follow the fields a mutation
writes, wherever the pod spec sits (a Pod's `/spec`, a template's
`/spec/template/spec`, a CronJob's deeper one):

- `affinity`: the node affinity of the class's pools and models;
- `co-location`: the preferred pod affinity of a workload's own pods;
- `tolerations`: the pools' taints;
- `priority`: the class's PriorityClass (and the integer and preemption policy with it);
- `gpu-limits`: equal GPU requests and limits;
- `gpu-isolation`: `NVIDIA_VISIBLE_DEVICES=void` on containers without GPUs;
- any other field by its own name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ORDER = (
    "affinity",
    "co-location",
    "tolerations",
    "priority",
    "gpu-limits",
    "gpu-isolation",
)
PRIORITY_FIELDS = frozenset({"priorityClassName", "priority", "preemptionPolicy"})
CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})


def injected(patch: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The names of what `patch` writes, in ORDER, then any other field's in the order
    they come."""
    found: dict[str, None] = {}
    for operation in patch:
        path = operation.get("path")
        if isinstance(path, str) and operation.get("op") != "remove":
            for name in _names(path, operation.get("value")):
                found[name] = None
    known = [name for name in ORDER if name in found]
    return (*known, *(name for name in found if name not in ORDER))


def joined(recorded: object, names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` added to those an earlier mutation `recorded` (a template's, which the pod
    made from it carries), in ORDER. Of what is recorded, only ORDER's names are kept:
    anyone may write the annotation, and it is not ours to repeat what it says."""
    if not isinstance(recorded, str):
        return names
    before = {name.strip() for name in recorded.split(",")} & set(ORDER)
    known = [name for name in ORDER if name in before or name in names]
    return (*known, *(name for name in names if name not in ORDER))


def _names(path: str, value: Any) -> list[str]:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    spec = _last_spec(tokens)
    if spec is None or spec + 1 >= len(tokens):
        return _spec_names(value) if spec is not None else []
    field, rest = tokens[spec + 1], tokens[spec + 2 :]
    if field == "affinity":
        return _affinity_names(rest[0] if rest else None, value)
    if field == "tolerations":
        return ["tolerations"]
    if field in PRIORITY_FIELDS:
        return ["priority"]
    if field in CONTAINER_LISTS:
        return _container_names(rest, value)
    return [field]


def _last_spec(tokens: list[str]) -> int | None:
    """The index of the `spec` that holds a pod's fields: the last one in the path."""
    indexes = [i for i, token in enumerate(tokens) if token == "spec"]
    return indexes[-1] if indexes else None


def _spec_names(value: Any) -> list[str]:
    if not isinstance(value, Mapping):
        return []
    return [name for key, item in value.items() for name in _names(f"/spec/{key}", item)]


def _affinity_names(kind: str | None, value: Any) -> list[str]:
    kinds = [kind] if kind is not None else list(value) if isinstance(value, Mapping) else []
    names = []
    for each in kinds:
        if each == "nodeAffinity":
            names.append("affinity")
        elif each in ("podAffinity", "podAntiAffinity"):
            names.append("co-location")
    return names


def _container_names(rest: list[str], value: Any) -> list[str]:
    """`resources` -> gpu-limits, `env` -> gpu-isolation (the only container fields a
    mutation writes), under a container at `rest[0]`."""
    field = rest[1] if len(rest) > 1 else None
    if field == "resources":
        return ["gpu-limits"]
    if field == "env":
        return ["gpu-isolation"]
    if field is None and isinstance(value, Mapping):
        return [n for key in value for n in _container_names(["0", str(key)], None)]
    return [field] if field else []
