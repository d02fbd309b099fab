"""Rule: a workload pod runs at its own class's priority, never a borrowed one."""

from __future__ import annotations

from webhook.engine.decision import Violation
from webhook.engine.pod import PodView
from webhook.policy.compiled import WorkloadClass

RULE = "priority-class"


def check_priority(pod: PodView, workload: WorkloadClass) -> list[Violation]:
    wanted = workload.priority_class
    if pod.priority_class_name == wanted.name:
        return []
    if pod.priority_class_name is None:
        return [
            Violation(
                RULE,
                f"{workload.name} pod has no priorityClassName; it must run at "
                f"{wanted.name!r} ({wanted.value}) so the scheduler ranks it correctly",
            )
        ]
    return [
        Violation(
            RULE,
            f"{workload.name} pod uses priorityClassName {pod.priority_class_name!r}, but the "
            f"{workload.name} class runs at {wanted.name!r} ({wanted.value}); remove "
            f"priorityClassName (it is set for you) or set it to {wanted.name}",
        )
    ]
