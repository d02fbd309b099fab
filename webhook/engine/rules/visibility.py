"""Rule: nobody picks GPUs by hand through NVIDIA_VISIBLE_DEVICES.

Setting it (by value or valueFrom) makes the NVIDIA runtime expose devices the
scheduler never gave the pod. Only `void` and `none` (see no GPU) are safe.
An env value that is not a string is malformed (Kubernetes itself would refuse
it, but a custom resource's template reaches us unchecked).
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.engine.decision import Violation, shorten
from webhook.engine.pod import Container
from webhook.engine.rules.context import RuleContext
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

RULE = "visible-devices"
SAFE_VALUES = frozenset({"void", "none"})


def check(context: RuleContext) -> list[Violation]:
    return check_visible_devices(context.policy, context.pod.all_containers())


def check_visible_devices(policy: Policy, containers: Iterable[Container]) -> list[Violation]:
    """Also what judges the debug containers added to a running pod."""
    violations = []
    name = policy.visible_devices_env
    for container in containers:
        for index, entry in enumerate(container.env):
            if entry.get("name") != name:
                continue
            value = entry.get("value")
            if value is not None and not isinstance(value, str):
                where = f"spec.{container.list_name}[{container.index}].env[{index}].value"
                raise MalformedObject(where, "must be a string")
            if entry.get("valueFrom") is not None:
                shown = f"{name} from valueFrom"
            elif value not in SAFE_VALUES:
                shown = f"{name}={shorten(value or '')}"
            else:
                continue
            violations.append(
                Violation(
                    RULE,
                    f"{container.describe} sets {shown}, which would expose GPUs the scheduler "
                    f"did not assign; remove it and request {policy.gpu_resource} instead "
                    f"(only 'void' or 'none' are accepted)",
                )
            )
    return violations
