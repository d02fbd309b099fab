"""Rule: a pod bound to a node by hand is judged where it lands.

A pod that names its node in `spec.nodeName` is never scheduled: kube-scheduler
does not look at it, so the GPU pools' NoSchedule taints do not keep it off them,
and the kubelet of that node starts it. It is judged as landing on the named
node's pool, which the live inventory knows. A node the service cannot place (no
live inventory, not synced yet, or no such node) may be a GPU node, so the pod is
refused until it can be placed; nothing a scheduler places is affected.
"""

from __future__ import annotations

from webhook.engine.decision import Unjudged, Violation, echo
from webhook.engine.rules.context import RuleContext
from webhook.engine.rules.placement import MODEL, NON_GPU, WRONG_POOL

ADVICE = "remove spec.nodeName and let the scheduler place the pod"


def check_node_name(context: RuleContext) -> list[Violation]:
    """For a pod of no class, the non-GPU placement rule; for a class pod, the pool
    placement rule, or the GPU model rule when the node has another model."""
    policy, pod, workload, now = context.policy, context.pod, context.workload, context.now
    node = pod.node_name
    if node is None:
        return []
    rule = NON_GPU if workload is None else WRONG_POOL
    subject = "pod without a workload class" if workload is None else f"{workload.name} pod"
    bound = f"{subject} names node {echo(node)} in spec.nodeName, which bypasses the scheduler"
    place = now.nodes.get(node) if now.nodes is not None else None
    if place is None:
        return [Unjudged(rule, f"{bound}, and {_unplaceable(now.nodes is None)}; {ADVICE}")]
    if place.pool is None:
        if not place.offers_gpus:
            return []
        return [
            Violation(
                rule,
                f"{bound}, and the node offers GPUs but is in no pool of the policy (no "
                f"{policy.pool_label} label a pool has), so nothing keeps other tenants' "
                f"GPUs from the pod; {ADVICE}",
            )
        ]
    pool = policy.pools[place.pool]
    if workload is None:
        return [
            Violation(
                rule,
                f"{bound} and the taints of GPU pool {place.pool} "
                f"({policy.pool_label}={pool.label_value}); {ADVICE}",
            )
        ]
    if place.pool not in workload.pools:
        return [
            Violation(
                rule,
                f"{bound}; the node is in pool {place.pool} "
                f"({policy.pool_label}={pool.label_value}), which is not for "
                f"{workload.name}; {ADVICE}",
            )
        ]
    return _other_model(context, bound, place.model)


def _unplaceable(no_inventory: bool) -> str:
    unknown = (
        "the service has no live inventory of nodes" if no_inventory else "no such node exists"
    )
    return f"{unknown}, so whether it is a GPU node cannot be told"


def _other_model(context: RuleContext, bound: str, node_model: str | None) -> list[Violation]:
    label = context.policy.gpu_model_label
    model = context.pod.labels.get(label)
    if model and node_model and model != node_model:
        return [
            Violation(
                MODEL,
                f"{bound}; the node has GPU model {node_model}, but the pod is labelled "
                f"{label}={model}; {ADVICE}",
            )
        ]
    return []
