"""Rules: a pod must fit on one node of its pools, and MIG slices must exist there.

The effective GPU request (see resources.effective_gpu_request) is compared with
the largest node of the class's pools, and each `nvidia.com/mig-<profile>` with
what the pools offer. A pool the live inventory knows (see ``webhook.engine.capacity``) is judged
by its schedulable nodes' allocatable resources now; any other pool, and any model
of a pool with no node now, by the policy's static figures and the MIG catalog.
The pod passes if one of them fits it.
"""

from __future__ import annotations

import re
from decimal import Decimal

from webhook.engine.capacity.now import CapacityNow, PoolNow
from webhook.engine.decision import REASONS_LIMIT, Violation, shorten
from webhook.engine.quantities import format_count
from webhook.engine.resources import effective_gpu_request, pod_requests_gpu
from webhook.engine.rules.context import RuleContext
from webhook.policy.compiled import GPU_DEVICE, Policy, Pool

COUNT = "gpu-count"
MIG = "mig-profile"
MIG_PROFILE = re.compile(r"^[1-9][0-9]?g\.[1-9][0-9]*gb(\.me|\.me\.all|\.gfx|-me)?$")


def check_capacity(context: RuleContext) -> list[Violation]:
    """The gpu-count rule for whole GPUs (and shared ones), the mig-profile rule for MIG
    slices, resource by resource in the order the pod requests them."""
    policy, pod, now = context.policy, context.pod, context.now
    model = context.known_class.pinned_model(pod.labels.get(policy.gpu_model_label))
    pools = policy.pools_for(context.known_class, model)
    violations: list[Violation] = []
    requested = effective_gpu_request(policy, pod)
    for judged, (resource, amount) in enumerate(requested.items()):
        if len(violations) == REASONS_LIMIT:
            violations.append(_not_judged(len(requested) - judged))
            break
        if amount != amount.to_integral_value():
            continue  # the quantity rule names the container
        if resource in policy.dra_extended_resources:
            problem = _dra_extended(
                policy, context.known_class.name, pools, resource, amount, model
            )
            if problem is not None:
                violations.append(Violation(COUNT, problem))
            continue
        whole = resource == policy.gpu_resource or resource in policy.other_gpu_resources
        if not whole and not MIG_PROFILE.match(resource.removeprefix(policy.mig_prefix)):
            violations.append(_not_a_mig_resource(policy, resource))
            continue
        static, live = _static_and_live(pools, model, now)
        if static and resource in policy.other_gpu_resources:
            continue  # how many shared replicas a node has is only known from its nodes
        problems = []
        if static:
            problem = (
                _whole_gpus(policy, static, amount, model)
                if resource == policy.gpu_resource
                else _mig_slices(policy, static, resource, amount, model)
            )
            if problem is None:
                continue
            problems.append(problem)
        if live:
            problem = _live(policy, live, resource, amount, model)
            if problem is None:
                continue
            problems.append(problem)
        rule = COUNT if whole else MIG
        violations.append(Violation(rule, "; ".join(problems)))
    return violations


def _static_and_live(
    pools: list[Pool], model: str | None, now: CapacityNow
) -> tuple[list[Pool], list[PoolNow]]:
    """The pools (or models of pools) judged by the policy's figures, and those by their
    nodes now. What has no schedulable node now is not "empty" but unknown: a node group
    scaled to zero, say, which the autoscaler grows on demand."""
    static: list[Pool] = []
    live: list[PoolNow] = []
    for pool in pools:
        pool_now = now.pool(pool.name)
        if pool_now is None or (model is not None and model not in pool_now.models):
            static.append(pool)
            continue
        live.append(pool_now)
        if model is None and pool_now.unseen is not None:
            static.append(pool_now.unseen)
    return static, live


def _not_judged(resources: int) -> Violation:
    """What stands for the resources left once a denial lists as many as it shows: a pod
    of 100,000 MIG resources is refused without working out each."""
    return Violation(MIG, f"{resources:,} more GPU resources were not judged")


def _not_a_mig_resource(policy: Policy, resource: str) -> Violation:
    return Violation(
        MIG,
        f"{shorten(resource)} is not a MIG resource name; expected {policy.mig_prefix}"
        f"<compute>g.<memory>gb such as {policy.mig_prefix}1g.5gb",
    )


def _live(
    policy: Policy, pools: list[PoolNow], resource: str, amount: Decimal, model: str | None
) -> str | None:
    """Why no schedulable node of `pools` holds `amount` of `resource` now, or None."""
    offers = {p.name: p.largest_of(resource, model) for p in pools}
    if any(o is not None and amount <= o.amount for o in offers.values()):
        return None
    names = " or ".join(offers)
    held = {name: o for name, o in offers.items() if o is not None}
    if held:
        pool = max(held, key=lambda name: held[name].amount)
        best = held[pool]
        return (
            f"pod requests {format_count(amount)} {resource}; the largest node in pool {pool}"
            f"{_of_model(model)} has {format_count(best.amount)} allocatable now (node "
            f"{best.node}); split the work into pods of at most {format_count(best.amount)}"
        )
    if not resource.startswith(policy.mig_prefix):
        return (
            f"pod requests {format_count(amount)} {resource}; no schedulable node in pool "
            f"{names}{_of_model(model)} has {resource} allocatable now"
        )
    profile = resource.removeprefix(policy.mig_prefix)
    offered = sorted(
        {
            r.removeprefix(policy.mig_prefix)
            for p in pools
            for r in p.offered(policy.mig_prefix, model)
        }
    )
    if offered:
        advice = f"offered now: {', '.join(offered)}"
    else:
        strategies = sorted({s for p in pools for s in p.mig_strategies})
        labelled = f" (MIG strategy of its nodes: {', '.join(strategies)})" if strategies else ""
        advice = f"its nodes offer no MIG slices{labelled}; request {policy.gpu_resource} instead"
    return (
        f"MIG profile {profile} is not offered now by any schedulable node of pool {names}"
        f"{_of_model(model)}; {advice}"
    )


def _dra_extended(
    policy: Policy,
    workload: str,
    pools: list[Pool],
    resource: str,
    amount: Decimal,
    model: str | None,
) -> str | None:
    """A DeviceClass's extended resource: the scheduler claims that many devices of the class
    on one node, so only pools whose nodes publish GPUs through DRA can hold them; a MIG
    class's count per node is only known from the ResourceSlices."""
    dra = [p for p in pools if p.takes_dra_gpus]
    if not dra:
        return (
            f"pod requests {resource}, devices of a DeviceClass that the scheduler claims "
            f"through Dynamic Resource Allocation, but pool {' or '.join(p.name for p in pools)} "
            f"of class {workload} gives GPUs through the device plugin only (gpusThrough); "
            f"request {policy.gpu_resource} instead"
        )
    if policy.dra_extended_resources[resource] != GPU_DEVICE:
        return None
    return _whole_gpus(policy, dra, amount, model, resource)


def _whole_gpus(
    policy: Policy,
    pools: list[Pool],
    amount: Decimal,
    model: str | None,
    resource: str | None = None,
) -> str | None:
    sizes = {p.name: p.gpus_per_node_of(model) for p in pools}
    if any(amount <= size for size in sizes.values()):
        return None
    largest = max(sizes, key=lambda name: sizes[name])
    return (
        f"pod requests {format_count(amount)} {resource or policy.gpu_resource}; the largest "
        f"node in pool {largest}{_of_model(model)} has {sizes[largest]}; split the work into pods "
        f"of at most {sizes[largest]}"
    )


def _mig_slices(
    policy: Policy, pools: list[Pool], resource: str, amount: Decimal, model: str | None
) -> str | None:
    profile = resource.removeprefix(policy.mig_prefix)
    mixed = [p for p in pools if p.mig_strategy == "mixed"]
    if not mixed:
        return (
            f"pod requests {resource} but pool {' or '.join(p.name for p in pools)} offers no "
            f"MIG slices ({', '.join(f'{p.name}: {p.mig_strategy}' for p in pools)}); "
            f"request {policy.gpu_resource} instead"
        )
    capacity = {p.name: p.mig_slices_per_node(profile, model) for p in mixed}
    if not any(capacity.values()):
        offered = sorted(
            {name for p in mixed for m in p.models_for(model) for name in m.mig_profiles}
        )
        products = sorted({m.product or m.name for p in mixed for m in p.models_for(model)})
        return (
            f"MIG profile {profile} is not offered by {', '.join(products)} in pool "
            f"{' or '.join(capacity)}; offered: {', '.join(offered)}"
        )
    most = max(capacity.values())
    if amount > most:
        pool = max(capacity, key=lambda name: capacity[name])
        return (
            f"pod requests {format_count(amount)} {resource}; a node in pool {pool} holds "
            f"at most {most} (per-GPU maximum x GPUs per node)"
        )
    return None


def _of_model(model: str | None) -> str:
    return f" with model {model}" if model else ""


def check_requests_gpu(context: RuleContext) -> list[Violation]:
    """A class pod runs on a GPU node at its class's priority: without a GPU it would
    hold a GPU node's place (and preempt for it) doing CPU work."""
    policy, workload = context.policy, context.known_class
    if pod_requests_gpu(policy, context.pod) or context.claims.may_ask_gpus:
        return []
    dra_only = not any(p.takes_device_plugin_gpus for p in policy.pools_of(workload))
    ask = (
        f"claim at least 1 GPU with a ResourceClaimTemplate of DeviceClass "
        f"{min(policy.dra.gpu_classes)}"
        if dra_only
        else f"request at least 1 {policy.gpu_resource}"
    )
    return [
        Violation(
            COUNT,
            f"{workload.name} pod requests no GPU, yet its class runs it on pool "
            f"{' or '.join(workload.pools)} at PriorityClass {workload.priority_class.name!r}; "
            f"{ask}, or remove the label {policy.workload_label} from a pod that needs no GPU",
        )
    ]
