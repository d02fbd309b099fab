"""Rules: GPUs claimed through Dynamic Resource Allocation, judged like GPU resources.

What a pod's claims ask for (see webhook.engine.dra.pod_claims) must be known, taken one
way per container, and fit its class's pools: the pools must take GPUs through DRA,
the whole GPUs the pod's claims ask for together must fit on one node, each MIG
profile must be one the pools' devices offer, each GPU product one they have. A pool
whose ResourceSlices the inventory knows is judged by its schedulable nodes' devices
now, any other by the policy's figures and the MIG catalog, as for the device plugin.
Selectors the policy cannot read are never guessed at: the ask is admitted with a
warning.

A ``firstAvailable`` request is met by the first of its alternatives that can be had,
so each is a way the pod may run. One asking more than any node of the pools holds (or
a product or MIG profile none has) can never be had and is passed over, as the scheduler
passes over it; the pod fits when some choice of the others fits one node together. A
class pod whose GPU request may be met by a device that is not a GPU would run on a GPU
node at its class's priority holding none: it is refused, naming the alternative.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal

from webhook.engine.capacity.now import CapacityNow
from webhook.engine.capacity.offers import Reached
from webhook.engine.decision import REASONS_LIMIT, Unjudged, Violation, shorten
from webhook.engine.dra.claims import Ask, DeviceRequest
from webhook.engine.dra.pod_claims import PodClaim, PodClaims
from webhook.engine.rules.capacity import COUNT, MIG
from webhook.engine.rules.context import RuleContext
from webhook.engine.rules.placement import MODEL
from webhook.policy.compiled import GPU_DEVICE, MIG_DEVICE, Policy, Pool

RULE = "resource-claims"
NOT_JUDGED = "claims-not-judged"
"""Selectors, and claims whose objects were not looked up (no cluster), not judged: at most
a warning, whatever the policy's mode (see registry)."""


def check_claims(context: RuleContext) -> list[Violation]:
    """Claims not known, containers taking GPUs both ways, selectors not judged."""
    claims = context.claims
    if not claims.claims:
        return []
    pod = context.pod
    violations = [
        Violation(
            NOT_JUDGED,
            f"{claim.describe()} not read, so not judged",
        )
        if claim.not_looked_up
        else (Unjudged if claim.unread else Violation)(
            RULE,
            f"{claim.describe()} {shorten(claim.problem or '', 200)}; the policy cannot tell "
            f"whether it claims GPUs: {_mend(claim)}",
        )
        for claim in claims.unknown
    ]
    for container in pod.all_containers():
        used = claims.gpu_claims_of(container)
        named = shorten(", ".join(q.resource for q in container.gpu if q.value != 0))
        if used and named:
            violations.append(
                Violation(
                    RULE,
                    f"{container.describe} requests {named} from the device plugin and uses "
                    f"GPU {_claims_of(used)}; a container takes GPUs one way: remove {named} "
                    f"from its resources, or its claim from resources.claims",
                )
            )
    violations += _selectors(claims)
    return violations[: REASONS_LIMIT * 2]


def _selectors(claims: PodClaims) -> list[Violation]:
    """A warning for each selector of a GPU ask the policy cannot read."""
    return [
        Violation(
            NOT_JUDGED,
            f"{claim.describe()} request {ask.request!r} selects devices with "
            f"{shorten(expression)!r}, which the policy does not judge",
        )
        for claim in claims.gpu_claims
        for ask in _gpu_asks(claim)
        for expression in ask.unjudged
    ]


def check_claim_capacity(context: RuleContext) -> list[Violation]:
    """The GPU claims of a class pod against its class's pools."""
    claims = context.claims
    if not claims.asks_gpus:
        return []
    policy, workload = context.policy, context.known_class
    model = workload.pinned_model(context.pod.labels.get(policy.gpu_model_label))
    pools = policy.pools_for(workload, model)
    dra_pools = [pool for pool in pools if pool.takes_dra_gpus]
    named = _claims_of([(claim, None) for claim in claims.gpu_claims])
    if not dra_pools:
        return [
            Violation(
                RULE,
                f"{workload.name} pod claims GPUs through Dynamic Resource Allocation "
                f"({named}), but pool {' or '.join(p.name for p in pools)} gives pods GPUs "
                f"through the device plugin only; request {policy.gpu_resource} in the "
                f"container's resources instead",
            )
        ]
    now = context.now
    fallbacks = _no_gpu_fallbacks(policy, workload.name, dra_pools, claims, now, model)
    return fallbacks + _fitting(policy, dra_pools, claims, now, model)


def _no_gpu_fallbacks(
    policy: Policy,
    workload: str,
    pools: list[Pool],
    claims: PodClaims,
    now: CapacityNow,
    model: str | None,
) -> list[Violation]:
    """A GPU request of a class pod that may be met by an alternative giving no GPU: the
    pod would run on a GPU node of its class, at its priority, holding another device."""
    violations = []
    names = " or ".join(pool.name for pool in pools)
    view = now.dra.classes_for(policy)
    classes = shorten(" or ".join(view.names(GPU_DEVICE) + view.names(MIG_DEVICE)), 200)
    for claim in claims.gpu_claims:
        for request in claim.asks.gpu_requests if claim.asks else ():
            fallback = next(iter(request.may_give_no_gpu), None)
            if fallback is None:
                continue
            before = request.alternatives[: request.alternatives.index(fallback)]
            never = [
                f"{ask.request!r} ({ask.describe()}) can never be had: {problem}"
                for ask in before
                if ask.is_gpu and (problem := _never_had(policy, pools, now, ask, model))
            ]
            taken = f"{fallback.request!r} ({_device(fallback)})"
            if not before:
                why = f"the scheduler takes {taken} first, wherever a node has one"
            elif len(never) == len(before):
                why = f"{'; '.join(never)}; so the scheduler takes {taken}"
            else:
                why = f"the scheduler takes {taken} when the alternatives before it cannot be had"
                why += f" ({'; '.join(never)})" if never else " (their GPUs are taken, say)"
            violations.append(
                Violation(
                    RULE,
                    f"{claim.describe()} request {request.name!r} may be met without a GPU: "
                    f"{shorten(why, 600)}, and the {workload} pod would run on pool {names} "
                    f"holding no GPU of it; make every alternative of {request.name!r} a GPU "
                    f"one that a node holds (DeviceClass {classes}), or remove "
                    f"{fallback.request!r}",
                )
            )
    return violations[:REASONS_LIMIT]


def _never_had(
    policy: Policy, pools: list[Pool], now: CapacityNow, ask: Ask, model: str | None
) -> str | None:
    """Why no node of `pools` could ever give `ask` alone, or None."""
    found = _judge(policy, pools, now, _wanted([("", ask)], alone=True), model)
    return found[0].message if found else None


def _device(ask: Ask) -> str:
    amount = "all devices" if ask.all_devices else f"{ask.count} device"
    plural = "s" if not ask.all_devices and ask.count != 1 else ""
    return f"{amount}{plural} of DeviceClass {ask.device_class}, not a GPU"


def check_device_plugin_pools(context: RuleContext) -> list[Violation]:
    """Device-plugin GPUs of a class pod whose pools all give GPUs through DRA only: no
    node would ever advertise them."""
    policy, workload, pod = context.policy, context.known_class, context.pod
    requested = sorted(
        {q.resource for c in pod.runnable_containers() for q in c.gpu if q.value != 0}
    )
    pools = policy.pools_of(workload)
    if not requested or any(pool.takes_device_plugin_gpus for pool in pools):
        return []
    gpu_class = min(policy.dra.gpu_classes)
    return [
        Violation(
            RULE,
            f"{workload.name} pod requests {shorten(', '.join(requested))}, but pool "
            f"{' or '.join(p.name for p in pools)} gives pods GPUs through Dynamic Resource "
            f"Allocation only; claim them with a ResourceClaimTemplate of DeviceClass "
            f"{gpu_class} instead",
        )
    ]


def claim_violations(policy: Policy, claims: PodClaims, now: CapacityNow) -> list[Violation]:
    """What no pool of the policy that takes claimed GPUs could ever give `claims` (a
    template or claim judged on its own, for no class in particular), and the selectors
    not judged."""
    pools = [pool for pool in policy.pools.values() if pool.takes_dra_gpus]
    if not pools:
        names = " or ".join(policy.pools)
        return [
            Violation(
                RULE,
                f"{_claims_of([(c, None) for c in claims.gpu_claims])} claims GPUs through "
                f"Dynamic Resource Allocation, but pool {names} gives pods GPUs through the "
                f"device plugin only (gpusThrough); request {policy.gpu_resource} instead",
            )
        ]
    found = _fitting(policy, pools, claims, now, None)
    found += [v for v in _selectors(claims)]
    return found


MAX_CHOICES = 64
"""Most choices of alternatives judged together for one pod, in the scheduler's order.
Past them the pod is refused only when even the fewest whole GPUs its requests could
take do not fit one node: never on a guess."""


def _fitting(
    policy: Policy, pools: list[Pool], claims: PodClaims, now: CapacityNow, model: str | None
) -> list[Violation]:
    """Why no choice of alternatives of the GPU requests of `claims` fits one node of
    `pools`, the choice the scheduler tries first named; none when one fits."""
    ways: list[list[tuple[str, Ask | None]]] = []
    violations: list[Violation] = []
    for claim in claims.gpu_claims:
        for request in claim.asks.gpu_requests if claim.asks else ():
            where = f"{claim.describe()} request {request.name!r}"
            had, never = _alternatives(policy, pools, now, request, model, where)
            if not had:
                violations.append(never)
            ways.append(had)
    if violations or not ways:
        return violations[:REASONS_LIMIT]
    first: list[Violation] | None = None
    for choice in itertools.islice(itertools.product(*ways), MAX_CHOICES):
        found = _judge(policy, pools, now, _wanted(choice), model)
        if not found:
            return []
        first = found if first is None else first
    if math.prod(len(way) for way in ways) <= MAX_CHOICES:
        return first or []
    fewest = [min(way, key=lambda where_ask: _whole_count(where_ask[1])) for way in ways]
    problem = _whole_gpus(pools, now, _wanted(fewest), model)
    return [Violation(COUNT, problem)] if problem is not None else []


def _whole_count(ask: Ask | None) -> int:
    """How many whole GPUs `ask` takes at least."""
    if ask is None or ask.kind != GPU_DEVICE:
        return 0
    return 1 if ask.all_devices else ask.count


def _alternatives(
    policy: Policy,
    pools: list[Pool],
    now: CapacityNow,
    request: DeviceRequest,
    model: str | None,
    where: str,
) -> tuple[list[tuple[str, Ask | None]], Violation]:
    """The ways of meeting `request` some node could give (None: devices that are no GPU,
    which the policy does not count), and what stands for it when there is none."""
    if len(request.alternatives) == 1:
        (ask,) = request.alternatives
        return [(where, ask if ask.is_gpu else None)], Violation(RULE, "")
    had: list[tuple[str, Ask | None]] = []
    never: list[tuple[Ask, Violation]] = []
    for ask in request.alternatives:
        if not ask.is_gpu:
            had.append((where, None))
            continue
        found = _judge(policy, pools, now, _wanted([("", ask)], alone=True), model)
        if found:
            never.append((ask, found[0]))
        else:
            had.append((f"{where} alternative {ask.request!r}", ask))
    reasons = "; ".join(
        f"{ask.request!r} ({ask.describe()}): {violation.message}"
        for ask, violation in never[:REASONS_LIMIT]
    )
    rule = never[0][1].rule if never else RULE
    return had, Violation(rule, f"{where} has no alternative a node could give: {reasons}")


@dataclass
class _Wanted:
    """What a pod's GPU claims ask for together, on the one node that gets them all."""

    gpus: int = 0
    gpu_claims: list[str] = field(default_factory=list)
    all_gpus: bool = False
    mig: dict[str, int] = field(default_factory=dict)
    mig_claims: dict[str, list[str]] = field(default_factory=dict)
    products: dict[str, list[str]] = field(default_factory=dict)
    alone: bool = False
    """One alternative judged by itself: the reasons say only what the pools lack."""


def _wanted(choice: Iterable[tuple[str, Ask | None]], alone: bool = False) -> _Wanted:
    """What one choice of alternatives asks together, each with where it is asked."""
    wanted = _Wanted(alone=alone)
    for where, ask in choice:
        if ask is None:
            continue
        if ask.product:
            wanted.products.setdefault(ask.product, []).append(where)
        if ask.kind == GPU_DEVICE:
            wanted.gpu_claims.append(f"{where}: {ask.describe()}" if where else ask.describe())
            if ask.all_devices:
                wanted.all_gpus = True
            else:
                wanted.gpus += ask.count
        elif ask.kind == MIG_DEVICE and ask.profile:
            wanted.mig[ask.profile] = wanted.mig.get(ask.profile, 0) + (
                0 if ask.all_devices else ask.count
            )
            wanted.mig_claims.setdefault(ask.profile, []).append(where or ask.describe())
    return wanted


def _judge(
    policy: Policy, pools: list[Pool], now: CapacityNow, wanted: _Wanted, model: str | None
) -> list[Violation]:
    """Why no node of `pools` gives `wanted` together, or none."""
    violations = _products(policy, pools, wanted, model)
    if violations:
        return violations
    problem = _whole_gpus(pools, now, wanted, model)
    if problem is not None:
        violations.append(Violation(COUNT, problem))
    for profile in sorted(wanted.mig):
        problem = _mig(pools, now, wanted, profile, model)
        if problem is not None:
            violations.append(Violation(MIG, problem))
    return violations


def _products(
    policy: Policy, pools: list[Pool], wanted: _Wanted, model: str | None
) -> list[Violation]:
    violations = []
    for product, where in wanted.products.items():
        models = {pool.name: pool.model_of_product(product) for pool in pools}
        if any(found is not None and model in (None, found) for found in models.values()):
            continue
        have = sorted({m.product or m.name for pool in pools for m in pool.models_for(model)})
        lacking = f"pool {' or '.join(models)} does not have{_of_model(model)}"
        has = f"it has: {', '.join(have) or 'no known model'}"
        violations.append(
            Violation(
                MODEL,
                f"{lacking} GPU product {shorten(product)!r}; {has}"
                if wanted.alone
                else f"{where[0]} asks for GPU product {shorten(product)!r}, which {lacking}; "
                f"{has}",
            )
        )
    return violations


def _whole_gpus(
    pools: list[Pool], now: CapacityNow, wanted: _Wanted, model: str | None
) -> str | None:
    if not wanted.gpu_claims:
        return None
    sizes: dict[str, tuple[Decimal, str | None]] = {}
    for pool in pools:
        live = now.offer(pool.name, Reached.DRA)
        if live is not None and (model is None or model in live.models):
            largest = live.largest_gpus(model)
            sizes[pool.name] = (largest.amount, largest.node) if largest else (Decimal(0), None)
        else:
            sizes[pool.name] = (Decimal(pool.gpus_per_node_of(model)), None)
    needed = max(wanted.gpus, 1)
    if any(needed <= size for size, _ in sizes.values()):
        return None
    biggest = max(sizes, key=lambda name: sizes[name][0])
    most, node = sizes[biggest]
    on = f" now (node {node})" if node else ""
    asked = "; ".join(wanted.gpu_claims[:REASONS_LIMIT])
    if wanted.alone:
        return (
            f"the largest node in pool {biggest}{_of_model(model)} has {most}{on}"
            if most
            else f"no schedulable node of pool {' or '.join(sizes)}{_of_model(model)} "
            f"publishes a GPU now"
        )
    if most == 0:
        return (
            f"pod claims {needed} GPU{'s' if needed > 1 else ''} ({asked}); no schedulable "
            f"node of pool {' or '.join(sizes)}{_of_model(model)} publishes a GPU now"
        )
    return (
        f"pod claims {needed} GPUs ({asked}); the largest node in pool {biggest}"
        f"{_of_model(model)} has {most}{on}; claim at most {most} per pod"
    )


def _mig(
    pools: list[Pool], now: CapacityNow, wanted: _Wanted, profile: str, model: str | None
) -> str | None:
    amount = max(wanted.mig[profile], 1)
    where = "; ".join(wanted.mig_claims[profile][:REASONS_LIMIT])
    offered: set[str] = set()
    most = Decimal(0)
    for pool in pools:
        live = now.offer(pool.name, Reached.DRA)
        if live is not None and (model is None or model in live.models):
            largest = live.largest_mig(profile, model)
            count = largest.amount if largest else Decimal(0)
            offered.update(live.mig_profiles(model))
        else:
            count = Decimal(pool.mig_slices_per_node(profile, model))
            if pool.mig_strategy == "mixed":
                offered.update(p for m in pool.models_for(model) for p in m.mig_profiles)
        if amount <= count:
            return None
        most = max(most, count)
    names = " or ".join(pool.name for pool in pools)
    if wanted.alone:
        advice = f"offered: {', '.join(sorted(offered))}" if offered else "it offers no MIG devices"
        return (
            f"a node of pool {names} offers at most {most}"
            if most
            else f"no node of pool {names}{_of_model(model)} offers MIG profile "
            f"{shorten(profile)}; {advice}"
        )
    if most == 0:
        advice = f"offered: {', '.join(sorted(offered))}" if offered else "it offers no MIG devices"
        return (
            f"{where} asks for MIG profile {shorten(profile)}, which no node of pool {names}"
            f"{_of_model(model)} offers; {advice}"
        )
    return (
        f"pod claims {amount} MIG devices of profile {profile} ({where}); a node of pool "
        f"{names} offers at most {most}"
    )


def _gpu_asks(claim: PodClaim) -> list[Ask]:
    return [
        ask
        for request in (claim.asks.gpu_requests if claim.asks else ())
        for ask in request.alternatives
        if ask.is_gpu
    ]


def _claims_of(used: list[tuple[PodClaim, str | None]]) -> str:
    described = [
        claim.describe() + (f" request {request!r}" if request else "") for claim, request in used
    ]
    return ", ".join(described)


def _mend(claim: PodClaim) -> str:
    if claim.source is None:
        return "name its resourceClaimTemplateName or resourceClaimName"
    if claim.problem == "does not exist":
        return f"create the {claim.source.kind} in the pod's namespace before the pod"
    return "try again"


def _of_model(model: str | None) -> str:
    return f" with model {model}" if model else ""
