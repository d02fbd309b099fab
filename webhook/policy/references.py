"""The checks that look at more than one field of a policy: a class naming a pool that does
not exist, two pools sharing a node label value, a product the MIG catalog does not have,
a rule name the engine does not have, a DeviceClass meaning both whole GPUs and MIG
slices, and the like.

They read the data as the YAML gave it, not the checked model, and pass over whatever is
not shaped as the model wants: so they run even when pydantic refuses other fields, and a
policy's every problem is reported at once (pydantic reports the shapes). Each problem is
a field path and a reason; ``webhook.policy.load`` finds its line.

Each check is linear in the size of the policy (membership in sets, lists of names
joined once and at most ``NAMES_LISTED`` long): a policy of thousands of repeated
names is as quick to refuse as to read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Any

from webhook.policy.catalog import MigCatalog
from webhook.policy.model import BUILT_IN_TEMPLATE_KINDS, DeviceAttributes, default_workload_kinds
from webhook.policy.yaml_source import FieldPath

BUILT_IN_GROUPS = ("", "apps", "batch")
"""Pods and the controllers of these groups have their templates known without a policy."""

Found = tuple[FieldPath, str]
"""A problem: the path of the offending key or value, and the reason."""

NAMES_LISTED = 30
"""Most names a reason lists (the pools, classes, rules or products there are)."""


def reference_problems(
    data: dict[str, Any], catalog: MigCatalog, rule_names: Collection[str] | None
) -> list[Found]:
    """Every cross-field problem of a policy's data; `rule_names` None leaves the rule
    names `enforcement` uses unchecked (the engine checks them when it takes the policy)."""
    pools = data.get("pools")
    classes = data.get("classes")
    found = list(_pool_problems(_mapping(pools), catalog))
    if isinstance(pools, dict) and pools:
        found += _class_problems(_mapping(classes), pools)
    found += _enforcement_problems(
        _mapping(data.get("enforcement")),
        classes if isinstance(classes, dict) and classes else None,
        rule_names,
    )
    found += _workload_kind_problems(_list(data.get("workloadKinds")))
    found += _mutated_template_problems(data)
    found += _dra_problems(_mapping(data.get("dra")), _mapping(pools))
    found += _exemption_problems(_list(data.get("exemptions")))
    return found


def _pool_problems(pools: dict[Any, Any], catalog: MigCatalog) -> Iterator[Found]:
    by_label_value: dict[str, str] = {}
    for name, pool in pools.items():
        if not isinstance(name, str) or not isinstance(pool, dict):
            continue
        label_value = pool.get("labelValue") or name
        if isinstance(label_value, str):
            if label_value in by_label_value:
                yield (
                    ("pools", name, "labelValue"),
                    f"pools {by_label_value[label_value]!r} and {name!r} share the node label "
                    f"value {label_value!r}; each pool needs its own",
                )
            else:
                by_label_value[label_value] = name
        yield from _model_problems(name, pool, catalog)


def _model_problems(pool_name: str, pool: dict[str, Any], catalog: MigCatalog) -> Iterator[Found]:
    models = _mapping(pool.get("models"))
    offers_mig = unknown = False
    for name, gpu_model in models.items():
        product = gpu_model.get("product") if isinstance(gpu_model, dict) else None
        if isinstance(product, str) and catalog.find(product) is None:
            unknown = True
            yield (
                ("pools", pool_name, "models", name, "product"),
                f"unknown GPU product {product!r}; known: {_listing(catalog.names())}",
            )
        known = catalog.find(product if isinstance(product, str) else str(name))
        offers_mig = offers_mig or bool(known and known.profiles)
    # A model of an unknown product is reported already; what it offers is not known.
    if pool.get("mig") == "mixed" and models and not offers_mig and not unknown:
        capable = sorted({p.product for p in catalog.products.values() if p.mig_capable})
        yield (
            ("pools", pool_name, "mig"),
            "mixed MIG needs at least one model whose product offers MIG profiles; "
            f"MIG-capable products: {', '.join(capable)}",
        )


def _class_problems(classes: dict[Any, Any], pools: dict[Any, Any]) -> Iterator[Found]:
    pool_names = _listing(map(str, pools))
    for name, workload in classes.items():
        if not isinstance(name, str) or not isinstance(workload, dict):
            continue
        class_pools = [pool for pool in _list(workload.get("pools")) if isinstance(pool, str)]
        listed: set[str] = set()
        for index, pool in enumerate(_list(workload.get("pools"))):
            if not isinstance(pool, str):
                continue
            if pool not in pools:
                yield (
                    ("classes", name, "pools", index),
                    f"unknown pool {pool!r}; pools: {pool_names}",
                )
            elif pool in listed:
                yield (("classes", name, "pools", index), f"pool {pool!r} is listed twice")
            listed.add(pool)
        # `listed` now holds every pool of the class; its names are joined once, if needed.
        class_pool_names: str | None = None
        for index, preferred in enumerate(_list(workload.get("preferredPools"))):
            pool = preferred.get("pool") if isinstance(preferred, dict) else None
            if isinstance(pool, str) and pool not in listed:
                if class_pool_names is None:
                    class_pool_names = _listing(dict.fromkeys(class_pools))
                yield (
                    ("classes", name, "preferredPools", index, "pool"),
                    f"{pool!r} is not one of the class's pools ({class_pool_names})",
                )


def _enforcement_problems(
    enforcement: dict[Any, Any],
    classes: dict[Any, Any] | None,
    rule_names: Collection[str] | None,
) -> Iterator[Found]:
    yield from _rule_problems(("enforcement", "rules"), enforcement.get("rules"), rule_names)
    class_names = _listing(map(str, classes)) if classes is not None else ""
    for name, overrides in _mapping(enforcement.get("classes")).items():
        if classes is not None and name not in classes:
            yield (
                ("enforcement", "classes", name),
                f"unknown class {name!r}; classes: {class_names}",
            )
        if isinstance(overrides, dict):
            path = ("enforcement", "classes", name, "rules")
            yield from _rule_problems(path, overrides.get("rules"), rule_names)


def _rule_problems(
    path: FieldPath, modes: object, rule_names: Collection[str] | None
) -> Iterator[Found]:
    if rule_names is None:
        return
    known = set(rule_names)
    for rule in _mapping(modes):
        if rule not in known:
            yield (*path, rule), f"unknown rule {rule!r}; rules: {_listing(rule_names)}"


def _mutated_template_problems(data: dict[str, Any]) -> Iterator[Found]:
    """Each kind ``mutateTemplates`` names must be one whose templates are known."""
    named = data.get("mutateTemplates")
    if not isinstance(named, list):
        return
    kinds = data.get("workloadKinds")
    custom = (
        [k.get("kind") for k in kinds if isinstance(k, dict)]
        if isinstance(kinds, list)
        else [k.kind for k in default_workload_kinds()]
    )
    known = dict.fromkeys((*BUILT_IN_TEMPLATE_KINDS, *(k for k in custom if isinstance(k, str))))
    for index, kind in enumerate(named):
        if isinstance(kind, str) and kind not in known:
            yield (
                ("mutateTemplates", index),
                f"unknown kind {kind!r}; kinds with pod templates: {_listing(known)}",
            )


def _workload_kind_problems(kinds: list[Any]) -> Iterator[Found]:
    seen: set[tuple[str, str]] = set()
    for index, kind in enumerate(kinds):
        if not isinstance(kind, dict):
            continue
        group, name = kind.get("group"), kind.get("kind")
        if group in BUILT_IN_GROUPS:
            yield (
                ("workloadKinds", index, "group"),
                f"the kinds of group {group!r} are built in; list only custom kinds",
            )
        if isinstance(group, str) and isinstance(name, str):
            if (group, name) in seen:
                yield ("workloadKinds", index), f"{group} {name} is listed twice"
            seen.add((group, name))


def _exemption_problems(exemptions: list[Any]) -> Iterator[Found]:
    for index, exemption in enumerate(exemptions):
        if isinstance(exemption, dict) and not (
            exemption.get("namespaces") or exemption.get("podLabels")
        ):
            yield (
                ("exemptions", index),
                "an exemption names namespaces, podLabels or both; "
                "one with neither would exempt every pod",
            )


DRA_MIG_CLASSES = ("dra", "deviceClasses", "mig")


def _dra_problems(dra: dict[Any, Any], pools: dict[Any, Any]) -> Iterator[Found]:
    classes = _mapping(dra.get("deviceClasses"))
    yield from _listed_twice(("dra", "drivers"), _list(dra.get("drivers")), "driver")
    gpu_classes = _list(classes.get("gpu"))
    yield from _listed_twice(("dra", "deviceClasses", "gpu"), gpu_classes, "DeviceClass")
    mig_classes = _list(classes.get("mig"))
    yield from _listed_twice(DRA_MIG_CLASSES, mig_classes, "DeviceClass")
    gpu_names = {name for name in gpu_classes if isinstance(name, str)}
    for index, name in enumerate(mig_classes):
        if isinstance(name, str) and name in gpu_names:
            yield (
                (*DRA_MIG_CLASSES, index),
                f"DeviceClass {name!r} is listed under gpu too; a class's devices are either "
                "whole GPUs or MIG slices",
            )
    yield from _attribute_problems(_mapping(dra.get("attributes")))
    no_mig_class = "mig" in classes and not mig_classes
    for name, pool in pools.items():
        if isinstance(name, str) and isinstance(pool, dict):
            yield from _pool_dra_problems(name, pool, no_mig_class)


def _attribute_problems(attributes: dict[Any, Any]) -> Iterator[Found]:
    defaults: dict[str, str] = DeviceAttributes().model_dump(by_alias=True)
    read: dict[str, str] = {}
    for meaning, default in defaults.items():
        name = attributes.get(meaning, default)
        if not isinstance(name, str):
            continue
        if name in read:
            yield (
                ("dra", "attributes", meaning),
                f"{read[name]} and {meaning} both read the device attribute {name!r}; each "
                "meaning needs an attribute of its own",
            )
        else:
            read[name] = meaning


def _pool_dra_problems(name: str, pool: dict[str, Any], no_mig_class: bool) -> Iterator[Found]:
    through = pool.get("gpusThrough", "devicePlugin")
    if through == "dra" and pool.get("mig") == "single":
        yield (
            ("pools", name, "mig"),
            "single is the device plugin's MIG strategy (MIG slices advertised as whole "
            "GPUs); a pool whose gpusThrough is dra offers MIG devices through the MIG "
            "DeviceClasses: use mixed, or none",
        )
    if through in ("dra", "both") and pool.get("mig") == "mixed" and no_mig_class:
        yield (
            ("pools", name, "mig"),
            f"pool {name!r} takes GPUs through DRA with MIG (mixed), but "
            "dra.deviceClasses.mig names no DeviceClass for MIG devices",
        )


def _listed_twice(path: FieldPath, names: list[Any], what: str) -> Iterator[Found]:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if name in seen:
            yield (*path, index), f"{what} {name!r} is listed twice"
        seen.add(name)


def _listing(names: Iterable[str]) -> str:
    """`names` joined by commas, the first ``NAMES_LISTED`` of them and a count of the rest."""
    listed: list[str] = []
    more = 0
    for name in names:
        if len(listed) < NAMES_LISTED:
            listed.append(name)
        else:
            more += 1
    return ", ".join(listed) + (f" and {more:,} more" if more else "")


def _mapping(value: object) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []
