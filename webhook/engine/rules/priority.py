"""Rule: a workload pod runs at its own class's priority, never a borrowed one.

When the cluster's PriorityClasses are known, a class the policy names that does
not exist is refused here with what to do, rather than admitted with a class name
kube-apiserver would never resolve.
"""

from __future__ import annotations

from webhook.engine.capacity.now import CapacityNow
from webhook.engine.decision import Violation, echo
from webhook.engine.pod import PodView
from webhook.engine.rules.context import RuleContext
from webhook.policy.compiled import Policy, WorkloadClass

RULE = "priority-class"


def check_priority(context: RuleContext) -> list[Violation]:
    """A class pod's PriorityClass is its class's; a pod of no class uses none of theirs."""
    if context.workload is None:
        return _unclassed_priority(context.policy, context.pod)
    return _class_priority(context.pod, context.workload, context.now)


def _class_priority(pod: PodView, workload: WorkloadClass, now: CapacityNow) -> list[Violation]:
    wanted = workload.priority_class
    if now.priority_classes is not None and wanted.name not in now.priority_classes:
        return [
            Violation(
                RULE,
                f"the policy runs {workload.name} pods at PriorityClass {wanted.name!r}, which "
                f"does not exist in this cluster; a cluster operator must create it (value "
                f"{wanted.value}) or change the policy before {workload.name} pods can run",
            )
        ]
    if pod.priority_class_name == wanted.name:
        return []
    live = now.priority_classes.get(wanted.name) if now.priority_classes is not None else None
    value = live.value if live is not None else wanted.value
    if pod.priority_class_name is None:
        return [
            Violation(
                RULE,
                f"{workload.name} pod has no priorityClassName; it must run at "
                f"{wanted.name!r} ({value}) so the scheduler ranks it correctly",
            )
        ]
    return [
        Violation(
            RULE,
            f"{workload.name} pod uses priorityClassName {echo(pod.priority_class_name)}, "
            f"but the {workload.name} class runs at {wanted.name!r} ({value}); remove "
            f"priorityClassName (it is set for you) or set it to {wanted.name}",
        )
    ]


def _unclassed_priority(policy: Policy, pod: PodView) -> list[Violation]:
    """A pod of no class may not use a class's PriorityClass: a CPU pod at the inference
    priority would preempt GPU workloads without ever being placed by the policy."""
    name = pod.priority_class_name
    if name is None or name not in policy.governed_priority_classes:
        return []
    owners = [c.name for c in policy.classes.values() if c.priority_class.name == name]
    return [
        Violation(
            RULE,
            f"pod without a workload class uses priorityClassName {name!r}, which the policy "
            f"reserves for {' and '.join(owners)} pods; remove priorityClassName, or label "
            f"the pod {policy.workload_label}={owners[0]} if it is one",
        )
    ]
