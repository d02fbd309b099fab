"""Compile a checked policy model into the frozen policy the engine reads.

Cross-references are checked here (a class naming a pool that does not exist,
a MIG pool whose GPUs cannot do MIG), with the field path of the mistake. The
rule names `enforcement` uses are kept with their paths for the engine, whose
rules they are, to check.
"""

from __future__ import annotations

from webhook.errors import PolicyError
from webhook.policy import compiled, model
from webhook.policy.catalog import MigCatalog

BUILT_IN_GROUPS = ("", "apps", "batch")
"""Pods and the controllers of these groups have their templates known without a policy."""


def compile_policy(spec: model.PolicySpec, catalog: MigCatalog, source: str) -> compiled.Policy:
    pools = {
        name: _compile_pool(name, pool, spec, catalog, source) for name, pool in spec.pools.items()
    }
    _reject_shared_label_values(pools, source)
    named_rules = _named_rules(spec, source)
    class_modes = spec.enforcement.classes
    classes = {
        name: _compile_class(name, workload, pools, source, class_modes.get(name))
        for name, workload in spec.classes.items()
    }
    node_kinds = tuple(
        compiled.NodeKind(
            pool=pool.name,
            model=gpu_model.name,
            labels={
                spec.node_labels.pool: pool.label_value,
                spec.node_labels.model: gpu_model.name,
            },
            taints=pool.taints,
        )
        for pool in pools.values()
        for gpu_model in pool.models.values()
    )
    return compiled.Policy(
        source=source,
        workload_label=spec.pod_labels.workload,
        gpu_model_label=spec.pod_labels.gpu_model,
        pool_label=spec.node_labels.pool,
        model_label=spec.node_labels.model,
        gpu_resource=spec.resources.gpu,
        mig_prefix=spec.resources.mig_prefix,
        other_gpu_resources=frozenset(spec.resources.other_gpus) - {spec.resources.gpu},
        visible_devices_env=spec.resources.visible_devices_env,
        namespace_opt_in=(spec.namespace_opt_in.key, spec.namespace_opt_in.value),
        pools=pools,
        classes=classes,
        node_kinds=node_kinds,
        gpu_taints=_unique(t for pool in pools.values() for t in pool.taints),
        node_label_keys=frozenset((spec.node_labels.pool, spec.node_labels.model)),
        workload_kinds=_compile_workload_kinds(spec.workload_kinds, source),
        governed_priority_classes=frozenset(c.priority_class.name for c in classes.values()),
        default_mode=spec.enforcement.default,
        rule_modes=dict(spec.enforcement.rules),
        exemptions=_compile_exemptions(spec.exemptions, source),
        named_rules=named_rules,
    )


def _named_rules(spec: model.PolicySpec, source: str) -> tuple[tuple[str, str], ...]:
    """Each rule `enforcement` names, with its field path; a class it names must exist.
    Whether a rule of that name exists is for the engine to say (see webhook.engine.rules)."""
    enforcement = spec.enforcement
    named = [(f"enforcement.rules.{rule}", rule) for rule in enforcement.rules]
    for name, overrides in enforcement.classes.items():
        if name not in spec.classes:
            raise PolicyError(
                source,
                f"enforcement.classes.{name}",
                f"unknown class {name!r}; classes: {', '.join(spec.classes)}",
            )
        named += [(f"enforcement.classes.{name}.rules.{rule}", rule) for rule in overrides.rules]
    return tuple(named)


def _compile_exemptions(
    exemptions: list[model.Exemption], source: str
) -> tuple[compiled.Exemption, ...]:
    for index, exemption in enumerate(exemptions):
        if not exemption.namespaces and not exemption.pod_labels:
            raise PolicyError(
                source,
                f"exemptions[{index}]",
                "an exemption names namespaces, podLabels or both; "
                "one with neither would exempt every pod",
            )
    return tuple(
        compiled.Exemption(frozenset(e.namespaces), dict(e.pod_labels), e.reason)
        for e in exemptions
    )


def _compile_workload_kinds(
    kinds: list[model.WorkloadKind], source: str
) -> tuple[compiled.TemplateKind, ...]:
    seen: set[tuple[str, str]] = set()
    for index, kind in enumerate(kinds):
        if kind.group in BUILT_IN_GROUPS:
            raise PolicyError(
                source,
                f"workloadKinds[{index}].group",
                f"the kinds of group {kind.group!r} are built in; list only custom kinds",
            )
        if (kind.group, kind.kind) in seen:
            raise PolicyError(
                source, f"workloadKinds[{index}]", f"{kind.group} {kind.kind} is listed twice"
            )
        seen.add((kind.group, kind.kind))
    return tuple(
        compiled.TemplateKind(k.group, k.kind, tuple(k.template_paths), k.resource) for k in kinds
    )


def _compile_pool(
    name: str, pool: model.Pool, spec: model.PolicySpec, catalog: MigCatalog, source: str
) -> compiled.Pool:
    label_value = pool.label_value or name
    taints = (
        tuple(compiled.Taint(t.key, t.value, t.effect) for t in pool.taints)
        if pool.taints is not None
        else (compiled.Taint(spec.node_labels.pool, label_value, "NoSchedule"),)
    )
    models = {
        model_name: _compile_model(name, model_name, gpu_model, pool, catalog, source)
        for model_name, gpu_model in pool.models.items()
    }
    if pool.mig == "mixed" and not any(m.mig_profiles for m in models.values()):
        raise PolicyError(
            source,
            f"pools.{name}.mig",
            "mixed MIG needs at least one model whose product offers MIG profiles; "
            f"MIG-capable products: {', '.join(_mig_products(catalog))}",
        )
    return compiled.Pool(
        name=name,
        label_value=label_value,
        gpus_per_node=max(m.gpus_per_node for m in models.values()),
        taints=taints,
        models=models,
        mig_strategy=pool.mig,
    )


def _compile_model(
    pool_name: str,
    model_name: str,
    gpu_model: model.GpuModel,
    pool: model.Pool,
    catalog: MigCatalog,
    source: str,
) -> compiled.GpuModel:
    product_name = gpu_model.product or model_name
    product = catalog.find(product_name)
    path = f"pools.{pool_name}.models.{model_name}.product"
    if gpu_model.product is not None and product is None:
        raise PolicyError(
            source,
            path,
            f"unknown GPU product {gpu_model.product!r}; known: {', '.join(catalog.names())}",
        )
    return compiled.GpuModel(
        name=model_name,
        product=product.product if product else gpu_model.product,
        gpus_per_node=gpu_model.gpus_per_node or pool.gpus_per_node,
        mig_profiles=dict(product.profiles) if product and pool.mig == "mixed" else {},
    )


def _compile_class(
    name: str,
    workload: model.WorkloadClass,
    pools: dict[str, compiled.Pool],
    source: str,
    enforcement: model.ClassEnforcement | None = None,
) -> compiled.WorkloadClass:
    for index, pool_name in enumerate(workload.pools):
        if pool_name not in pools:
            raise PolicyError(
                source,
                f"classes.{name}.pools[{index}]",
                f"unknown pool {pool_name!r}; pools: {', '.join(pools)}",
            )
    if len(set(workload.pools)) != len(workload.pools):
        raise PolicyError(source, f"classes.{name}.pools", "a pool is listed twice")
    for index, preferred in enumerate(workload.preferred_pools):
        if preferred.pool not in workload.pools:
            raise PolicyError(
                source,
                f"classes.{name}.preferredPools[{index}].pool",
                f"{preferred.pool!r} is not one of the class's pools ({', '.join(workload.pools)})",
            )
    class_pools = [pools[p] for p in workload.pools]
    co_location = workload.co_location
    return compiled.WorkloadClass(
        name=name,
        pools=tuple(workload.pools),
        pool_label_values=tuple(p.label_value for p in class_pools),
        preferred_pools=tuple(
            (pools[p.pool].label_value, p.weight) for p in workload.preferred_pools
        ),
        priority_class=compiled.PriorityClass(
            name=workload.priority_class.name,
            value=workload.priority_class.value,
            preemption_policy=workload.priority_class.preemption_policy,
        ),
        default_gpus=workload.default_gpus,
        co_location=(
            compiled.CoLocation(
                topology_key=co_location.topology_key,
                weight=co_location.weight,
                job_labels=tuple(co_location.job_labels),
            )
            if co_location
            else None
        ),
        taints=_unique(t for p in class_pools for t in p.taints),
        models=tuple(dict.fromkeys(m for p in class_pools for m in p.models)),
        rule_modes=dict(enforcement.rules) if enforcement else {},
        mutate=enforcement.mutate if enforcement else True,
    )


def _reject_shared_label_values(pools: dict[str, compiled.Pool], source: str) -> None:
    seen: dict[str, str] = {}
    for pool in pools.values():
        if pool.label_value in seen:
            raise PolicyError(
                source,
                f"pools.{pool.name}.labelValue",
                f"pools {seen[pool.label_value]!r} and {pool.name!r} share the node label value "
                f"{pool.label_value!r}; each pool needs its own",
            )
        seen[pool.label_value] = pool.name


def _mig_products(catalog: MigCatalog) -> list[str]:
    return sorted({p.product for p in catalog.products.values() if p.mig_capable})


def _unique(taints: object) -> tuple[compiled.Taint, ...]:
    return tuple(dict.fromkeys(taints))  # type: ignore[call-overload]
