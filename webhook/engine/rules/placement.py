"""Rules: pods stay off the wrong pools and can reach their own.

A workload pod is refused when a GPU node outside its class's pools is possibly
reachable, or when every node of its own pools is certainly unreachable. A pod
with no GPU is refused when any GPU node is possibly reachable, but for the nodes of a
pool the policy declares untainted (open to every pod by its operator's choice). A GPU
node is any
the cluster can hold (``Policy.node_kinds``): of the policy's pools and models, of
their pools with a model label they do not list or none, of a pool the policy does
not name and, with the live inventory, each GPU node it holds that none of those
covers (``CapacityNow.gpu_node_kinds``). A GPU model the class's pools do not have
is refused with the models they do have.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.engine.decision import Violation, echo, shorten
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
from webhook.policy.compiled import NO_MODEL, SEEN, NodeKind, Policy

WRONG_POOL = "pool-placement"
NON_GPU = "non-gpu-placement"
MODEL = "gpu-model"

UNKNOWN_POOL = ""
"""Where a kind of node of a pool the policy does not name is (see ``_places``)."""


def check_class_placement(context: RuleContext) -> list[Violation]:
    """A class pod on the wrong pool or never on its own: worked out once per placement."""
    return context.answers.find(class_placement_violations, context)


def check_non_gpu_placement(context: RuleContext) -> list[Violation]:
    """A pod with no GPU that could reach a GPU node: worked out once per placement."""
    return context.answers.find(non_gpu_placement_violations, context)


def class_placement_violations(context: RuleContext) -> list[Violation]:
    policy, pod, workload = context.policy, context.pod, context.known_class
    # Its own pools' nodes of other models or none: neither wrong nor what "never" counts.
    kinds = [
        kind
        for kind in (*context.placement.candidates(pod, workload.name), *context.now.gpu_node_kinds)
        if kind.listed or kind.pool not in workload.pools
    ]
    reach = reach_of(policy, pod, kinds)
    violations = []
    wrong = [r.kind for r in reach if r.kind.pool not in workload.pools and r.possibly]
    for place, group in _places(wrong):
        violations.append(
            Violation(
                WRONG_POOL,
                f"{workload.name} pod could be scheduled on {_describe(policy, place, group)}, "
                f"which is not for {workload.name}: {_let_in(pod, group)}; require "
                f"{policy.pool_label} In [{', '.join(workload.pool_label_values)}] and do not "
                f"tolerate {_taints(group)}",
            )
        )
    model = pod.labels.get(policy.gpu_model_label)
    own = [
        r
        for r in reach
        if r.kind.listed and r.kind.pool in workload.pools and (not model or r.kind.model == model)
    ]
    if own and not any(r.possibly for r in own):
        violations.append(
            Violation(
                WRONG_POOL,
                f"{workload.name} pod can never be scheduled on its pool "
                f"{_or_list(workload.pools)}{_why_unreachable(policy, pod, own)}",
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


def non_gpu_placement_violations(context: RuleContext) -> list[Violation]:
    policy = context.policy
    # A pool the policy declares untainted (`taints: []`) is open to every pod by its
    # operator's choice, and the webhooks' gpu-relevant-pod condition never sends a pod
    # that only such a pool could take. A GPU node the inventory saw without the taints
    # its pool should have is another matter: it is still counted.
    kinds = [
        kind
        for kind in (*context.placement.candidates(context.pod), *context.now.gpu_node_kinds)
        if not _open_by_policy(policy, kind)
    ]
    reached = [r.kind for r in reach_of(policy, context.pod, kinds) if r.possibly]
    if not reached:
        return []
    places = _places(reached)
    plain = [p for p, group in places if p in policy.pools and any(k.listed for k in group)]
    where = [f"GPU pool {_or_list(plain)}"] if plain else []
    for place, group in places:
        if place not in plain:
            shown = _describe(policy, place, group)
            where.append(f"GPU {shown}" if shown.startswith("pool ") else shown)
    return [
        Violation(
            NON_GPU,
            f"pod requests no GPU but could be scheduled on {', or '.join(where)} "
            f"({_let_in(context.pod, reached)}); add the node affinity requirement "
            f"{policy.pool_label} DoesNotExist, or drop the toleration",
        )
    ]


def _open_by_policy(policy: Policy, kind: NodeKind) -> bool:
    """Whether `kind` is a node of a pool the policy declares without taints."""
    pool = policy.pools.get(kind.pool) if kind.shape != SEEN and kind.pool else None
    return pool is not None and not pool.taints


def _places(kinds: list[NodeKind]) -> list[tuple[str, list[NodeKind]]]:
    """`kinds` grouped by where they are: a pool of the policy (its name), a pool the policy
    does not name (``UNKNOWN_POOL``), or one GPU node the live inventory saw (its name)."""
    groups: dict[str, list[NodeKind]] = {}
    for kind in kinds:
        place = f"node {kind.node}" if kind.shape == SEEN else kind.pool or UNKNOWN_POOL
        groups.setdefault(place, []).append(kind)
    return list(groups.items())


def _describe(policy: Policy, place: str, kinds: list[NodeKind]) -> str:
    """`pool training (gpu-pool=training)`, with which of its nodes when not those of the
    models it lists; `a GPU node of a pool the policy does not name`; `GPU node gpu-7 ...`."""
    if place == UNKNOWN_POOL:
        return "a GPU node of a pool the policy does not name"
    if kinds[0].shape == SEEN:
        kind = kinds[0]
        more = f" (and {kind.nodes - 1:,} more like it)" if kind.nodes > 1 else ""
        labels = ", ".join(f"{k}={v}" for k, v in kind.labels.items()) or (
            f"no {policy.pool_label} label"
        )
        taints = ", ".join(t.describe() for t in kind.taints) or "no taint"
        return f"GPU node {echo(kind.node)}{more} ({labels}; {taints})"
    pool = policy.pools[place]
    shown = f"pool {place} ({policy.pool_label}={pool.label_value})"
    if any(kind.listed for kind in kinds):
        return shown
    which = " or ".join(
        f"without label {policy.model_label}"
        if kind.shape == NO_MODEL
        else f"of a GPU model it does not list ({policy.model_label} not "
        f"{' or '.join(pool.models)})"
        for kind in kinds
    )
    return f"{shown}, on its nodes {which}"


def _let_in(pod: PodView, kinds: list[NodeKind]) -> str:
    """What lets the pod onto nodes of `kinds`: the tolerations of their taints, by path and
    as written, and no nodeSelector or required node affinity that keeps it off."""
    found = tolerating(pod.tolerations, [t for kind in kinds for t in kind.taints])
    allowed = (
        _and_list(found)
        if found
        else "the nodes have no NoSchedule or NoExecute taint to keep it off"
    )
    return f"{allowed}, and neither spec.nodeSelector nor the required node affinity rules it out"


def _why_unreachable(policy: Policy, pod: PodView, own: list[Reach]) -> str:
    """What follows the pool's name: the taints the pod does not tolerate or, when its
    nodeSelector or required node affinity rules the nodes out, each clause that does, by
    path and value. Only a refused pod gets here: the clauses are found now, not while
    judging it."""
    untolerated = list(dict.fromkeys(t for r in own for t in r.untolerated))
    # A pod with no toleration at all was not mutated (a class that is not, a pod sent
    # to the validating webhook alone): nothing replaced the class's tolerations.
    advice = (
        "remove the tolerations that replace them"
        if pod.tolerations
        else "tolerate them (the mutating webhook adds these tolerations to the class's "
        "pods it mutates)"
    )
    not_tolerated = f"it does not tolerate {', '.join(t.describe() for t in untolerated)}; {advice}"
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
        f" (nodes labelled {nodes}): {lead}{_and_list(clauses)}; "
        f"remove or correct {'it' if len(found) == 1 else 'them'}"
    )
    still = [t for r in own if r.selected is not False for t in r.untolerated]
    return f"{why}; {not_tolerated}" if still else why


def _and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])}, and {items[-1]}"


def _taints(kinds: list[NodeKind]) -> str:
    return ", ".join(t.describe() for t in dict.fromkeys(t for k in kinds for t in k.taints)) or (
        "their taints"
    )


def _or_list(names: tuple[str, ...] | list[str]) -> str:
    return " or ".join(names)
