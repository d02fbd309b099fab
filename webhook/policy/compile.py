"""Compile a checked policy model into the frozen policy the engine reads.

The model has passed pydantic and the cross-references have been checked
(``webhook.policy.references``: a class naming a pool that does not exist, a MIG
pool whose GPUs cannot do MIG, ...), so compiling only builds. The rule names
`enforcement` uses are kept with their paths for the engine, whose rules they are,
to check again when it takes the policy.
"""

from __future__ import annotations

from webhook.policy import compiled, model
from webhook.policy.catalog import MigCatalog


def compile_policy(spec: model.PolicySpec, catalog: MigCatalog, source: str) -> compiled.Policy:
    """The frozen policy of a model that passed pydantic and ``reference_problems``."""
    pools = {name: _compile_pool(name, pool, spec, catalog) for name, pool in spec.pools.items()}
    class_modes = spec.enforcement.classes
    host_access = _compile_host_access(spec.host_access)
    classes = {
        name: _compile_class(name, workload, pools, class_modes.get(name), host_access)
        for name, workload in spec.classes.items()
    }
    node_kinds = _node_kinds(spec.node_labels.pool, spec.node_labels.model, pools)
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
        gpu_taints=_unique(t for kind in node_kinds for t in kind.taints),
        node_label_keys=frozenset((spec.node_labels.pool, spec.node_labels.model)),
        workload_kinds=tuple(
            compiled.TemplateKind(k.group, k.kind, tuple(k.template_paths), k.resource)
            for k in spec.workload_kinds
        ),
        mutated_template_kinds=_mutated_template_kinds(spec),
        governed_priority_classes=frozenset(c.priority_class.name for c in classes.values()),
        default_mode=spec.enforcement.default,
        rule_modes=dict(spec.enforcement.rules),
        exemptions=tuple(
            compiled.Exemption(frozenset(e.namespaces), dict(e.pod_labels), e.reason)
            for e in spec.exemptions
        ),
        named_rules=_named_rules(spec),
        host_access=host_access,
        dra=_compile_dra(spec.dra),
        device_env=frozenset(spec.resources.device_env),
        dra_extended_resources={
            **{
                f"{compiled.DRA_EXTENDED_RESOURCE_PREFIX}{c}": "gpu"
                for c in spec.dra.device_classes.gpu
            },
            **{
                f"{compiled.DRA_EXTENDED_RESOURCE_PREFIX}{c}": "mig"
                for c in spec.dra.device_classes.mig
            },
        },
    )


def _node_kinds(
    pool_key: str, model_key: str, pools: dict[str, compiled.Pool]
) -> tuple[compiled.NodeKind, ...]:
    """Every kind of GPU node a cluster can hold, as far as the pool and model labels tell:
    each pool's listed models, then its nodes of a model it does not list and its nodes
    without the model label, then the nodes of a pool the policy does not name (with a
    model label of any value, or none), tainted `<pool key>=<their pool>:NoSchedule` as the
    policy's pools are by default."""
    kinds: list[compiled.NodeKind] = []
    for pool in pools.values():
        pool_label = {pool_key: pool.label_value}
        kinds += [
            compiled.NodeKind(pool.name, model, {**pool_label, model_key: model}, pool.taints)
            for model in pool.models
        ]
        kinds.append(
            compiled.NodeKind(
                pool.name,
                "",
                pool_label,
                pool.taints,
                compiled.UNLISTED_MODEL,
                {model_key: frozenset(pool.models)},
            )
        )
        kinds.append(compiled.NodeKind(pool.name, "", pool_label, pool.taints, compiled.NO_MODEL))
    named = frozenset(pool.label_value for pool in pools.values())
    taint = compiled.Taint(pool_key, "", "NoSchedule", other_than=named)
    any_model: dict[str, frozenset[str]] = {model_key: frozenset()}
    for model_labels in (any_model, {}):
        kinds.append(
            compiled.NodeKind(
                "", "", {}, (taint,), compiled.UNKNOWN_POOL, {pool_key: named, **model_labels}
            )
        )
    return tuple(kinds)


def _compile_dra(dra: model.Dra) -> compiled.DraSettings:
    return compiled.DraSettings(
        drivers=frozenset(dra.drivers),
        gpu_classes=frozenset(dra.device_classes.gpu),
        mig_classes=frozenset(dra.device_classes.mig),
        type_attribute=dra.attributes.type,
        product_attribute=dra.attributes.product_name,
        profile_attribute=dra.attributes.mig_profile,
    )


def _mutated_template_kinds(spec: model.PolicySpec) -> frozenset[str]:
    if spec.mutate_templates is not None:
        return frozenset(spec.mutate_templates)
    kinds = (*model.BUILT_IN_TEMPLATE_KINDS, *(k.kind for k in spec.workload_kinds))
    return frozenset(kinds) - frozenset(model.LONG_RUNNING_KINDS)


def _named_rules(spec: model.PolicySpec) -> tuple[tuple[str, str], ...]:
    """Each rule `enforcement` names, with its field path. Whether a rule of that name
    exists is for the engine to say (see webhook.engine.rules)."""
    enforcement = spec.enforcement
    named = [(f"enforcement.rules.{rule}", rule) for rule in enforcement.rules]
    for name, overrides in enforcement.classes.items():
        named += [(f"enforcement.classes.{name}.rules.{rule}", rule) for rule in overrides.rules]
    return tuple(named)


def _compile_pool(
    name: str, pool: model.Pool, spec: model.PolicySpec, catalog: MigCatalog
) -> compiled.Pool:
    label_value = pool.label_value or name
    taints = (
        tuple(compiled.Taint(t.key, t.value, t.effect) for t in pool.taints)
        if pool.taints is not None
        else (compiled.Taint(spec.node_labels.pool, label_value, "NoSchedule"),)
    )
    models = {
        model_name: _compile_model(model_name, gpu_model, pool, catalog)
        for model_name, gpu_model in pool.models.items()
    }
    return compiled.Pool(
        name=name,
        label_value=label_value,
        gpus_per_node=max(m.gpus_per_node for m in models.values()),
        taints=taints,
        models=models,
        mig_strategy=pool.mig,
        gpus_through=pool.gpus_through,
        sharing=pool.sharing,
    )


def _compile_model(
    model_name: str, gpu_model: model.GpuModel, pool: model.Pool, catalog: MigCatalog
) -> compiled.GpuModel:
    product = catalog.find(gpu_model.product or model_name)
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
    enforcement: model.ClassEnforcement | None = None,
    host_access: compiled.HostAccess | None = None,
) -> compiled.WorkloadClass:
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
        host_access=(host_access or compiled.HostAccess())
        | _compile_host_access(workload.host_access),
    )


def _compile_host_access(access: model.HostAccess) -> compiled.HostAccess:
    paths: dict[str, bool] = {}
    for allowed in access.paths:
        paths[allowed.path] = paths.get(allowed.path, False) or not allowed.read_only
    return compiled.HostAccess(paths, access.host_network, access.host_pid, access.host_ipc)


def _unique(taints: object) -> tuple[compiled.Taint, ...]:
    return tuple(dict.fromkeys(taints))  # type: ignore[call-overload]
