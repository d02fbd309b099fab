"""Rules: pods stay off the wrong pools and can reach their own.

A workload pod is refused when a pool outside its class is possibly
reachable, or when every node of its own pools is certainly unreachable. A pod
with no GPU is refused when any GPU pool is possibly reachable. A GPU model
the class's pools do not have is refused with the models they do have.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from webhook.engine.decision import Violation, shorten
from webhook.engine.placement import Reach, reach_of
from webhook.engine.placement_exclusions import (
    REQUIRED_TERMS,
    Exclusion,
    exclusions,
    node_values,
    not_matching,
    tolerating,
)
from webhook.engine.pod import PodView
from webhook.engine.rules.context import RuleContext
from webhook.policy.compiled import Policy

WRONG_POOL = "pool-placement"
NON_GPU = "non-gpu-placement"
MODEL = "gpu-model"


def check_class_placement(context: RuleContext) -> list[Violation]:
    policy, pod, workload = context.policy, context.pod, context.known_class
    reach = reach_of(policy, pod, context.placement.candidates(pod, workload.name))
    violations = []
    wrong = _pools_where(reach, lambda r: r.kind.pool not in workload.pools and r.possibly)
    for pool in wrong:
        violations.append(
            Violation(
                WRONG_POOL,
                f"{workload.name} pod could be scheduled on pool {pool} "
                f"({policy.pool_label}={policy.pools[pool].label_value}), which is not for "
                f"{workload.name}: {_let_in(policy, pod, [pool])}; require {policy.pool_label} "
                f"In [{', '.join(workload.pool_label_values)}] and do not tolerate "
                f"{_taints(policy, pool)}",
            )
        )
    model = pod.labels.get(policy.gpu_model_label)
    own = [
        r for r in reach if r.kind.pool in workload.pools and (not model or r.kind.model == model)
    ]
    if own and not any(r.possibly for r in own):
        violations.append(
            Violation(
                WRONG_POOL,
                f"{workload.name} pod can never be scheduled on its pool "
                f"{_or_list(workload.pools)} {_why_unreachable(policy, pod, own)}",
            )
        )
    return violations


def check_model(context: RuleContext) -> list[Violation]:
    policy, workload = context.policy, context.known_class
    model = context.pod.labels.get(policy.gpu_model_label)
    if not model or model in workload.models:
        return []
    return [
        Violation(
            MODEL,
            f"label {policy.gpu_model_label}={shorten(model)} names a GPU model that pool "
            f"{_or_list(workload.pools)} does not have; models: {', '.join(workload.models)}",
        )
    ]


def check_non_gpu_placement(context: RuleContext) -> list[Violation]:
    policy = context.policy
    kinds = context.placement.candidates(context.pod)
    pools = _pools_where(reach_of(policy, context.pod, kinds), lambda r: r.possibly)
    if not pools:
        return []
    return [
        Violation(
            NON_GPU,
            f"pod requests no GPU but could be scheduled on GPU pool {_or_list(pools)} "
            f"({_let_in(policy, context.pod, pools)}); add the node affinity requirement "
            f"{policy.pool_label} DoesNotExist, or drop the toleration",
        )
    ]


def _let_in(policy: Policy, pod: PodView, pools: list[str]) -> str:
    """What lets the pod onto `pools`' nodes: the tolerations of their taints, by path and
    as written, and no nodeSelector or required node affinity that keeps it off."""
    taints = [t for p in pools for t in policy.pools[p].taints]
    found = tolerating(pod.tolerations, taints)
    allowed = (
        _and_list(found)
        if found
        else f"pool {_or_list(pools)} has no NoSchedule or NoExecute taint to keep it off"
    )
    return f"{allowed}, and neither spec.nodeSelector nor the required node affinity rules it out"


def _pools_where(reach: list[Reach], condition: Callable[[Reach], bool]) -> list[str]:
    return list(dict.fromkeys(r.kind.pool for r in reach if condition(r)))


def _why_unreachable(policy: Policy, pod: PodView, own: list[Reach]) -> str:
    """What follows the pool's name: the taints the pod does not tolerate or, when its
    nodeSelector or required node affinity rules the nodes out, each clause that does, by
    path and value. Only a refused pod gets here: the clauses are found now, not while
    judging it."""
    untolerated = list(dict.fromkeys(t for r in own for t in r.untolerated))
    not_tolerated = (
        f"it does not tolerate {', '.join(t.describe() for t in untolerated)}; "
        "remove the tolerations that replace them"
    )
    if untolerated and all(r.untolerated for r in own):
        return f": {not_tolerated}"
    found: dict[Exclusion, list[Mapping[str, str]]] = {}
    for r in own:
        if r.selected is False:
            for exclusion in exclusions(pod, r.kind.labels, policy.node_label_keys):
                found.setdefault(exclusion, []).append(r.kind.labels)
    clauses = not_matching(found.items()) or ["its nodeSelector or required node affinity"]
    keys = dict.fromkeys(key for r in own for key in r.kind.labels)
    nodes = ", ".join(node_values(key, [r.kind.labels for r in own]) for key in keys)
    several_terms = len(pod.required_terms or ()) > 1
    if several_terms and any(e.field.startswith(REQUIRED_TERMS) for e in found):
        lead = "no required node affinity term matches them: "
    else:
        lead = ""
    why = (
        f"(nodes labelled {nodes}): {lead}{_and_list(clauses)}; "
        f"remove or correct {'it' if len(found) == 1 else 'them'}"
    )
    still = [t for r in own if r.selected is not False for t in r.untolerated]
    return f"{why}; {not_tolerated}" if still else why


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])}, and {items[-1]}"


def _taints(policy: Policy, pool: str) -> str:
    return ", ".join(t.describe() for t in policy.pools[pool].taints) or "its taints"


def _or_list(names: tuple[str, ...] | list[str]) -> str:
    return " or ".join(names)
