"""Rule: GPU pods need a workload class; a class label must name a class."""

from __future__ import annotations

from webhook.engine.decision import Violation, shorten
from webhook.engine.gpu_shares import shares_asked
from webhook.engine.pod import PodView
from webhook.engine.resources import effective_gpu_request
from webhook.engine.rules.context import RuleContext, Standing
from webhook.policy.compiled import Policy

RULE = "workload-class"


def check(context: RuleContext) -> list[Violation]:
    policy = context.policy
    if context.standing is Standing.NO_CLASS_WITH_GPU:
        claimed = [claim.describe() for claim in context.claims.gpu_claims]
        return [missing_class(policy, requested_resources(policy, context.pod) + claimed)]
    if context.standing is Standing.UNKNOWN_CLASS and context.label is not None:
        return [unknown_class(policy, context.label)]
    return []


def missing_class(policy: Policy, resources: list[str]) -> Violation:
    return Violation(
        RULE,
        f"pod requests {shorten(', '.join(resources), 200)} but has no label "
        f"{policy.workload_label}; "
        f"set it to one of: {', '.join(policy.classes)}",
    )


def unknown_class(policy: Policy, value: str) -> Violation:
    return Violation(
        RULE,
        f"label {policy.workload_label}={shorten(value)} names no workload class; "
        f"use one of: {', '.join(policy.classes)}",
    )


def requested_resources(policy: Policy, pod: PodView) -> list[str]:
    """The GPU resources the pod requests (those the scheduler counts) and the GPU shares
    it asks for by annotation, else (amounts it cannot read) every GPU resource its
    containers name."""
    names = list(effective_gpu_request(policy, pod)) + shares_asked(pod.raw)
    if names:
        return names
    return list(dict.fromkeys(q.resource for c in pod.runnable_containers() for q in c.gpu))
