"""Rule: nobody asks the container runtime for devices through the environment.

Besides NVIDIA_VISIBLE_DEVICES (rule visible-devices), the NVIDIA Container Toolkit
reads more variables as requests for devices: IMEX channels, MIG configuration and
monitoring, GDS, MOFED, NVSwitch and GDRCopy devices (the policy's
`resources.deviceEnv`). A container of a pod that can reach a GPU node may set none
of them, by value or valueFrom, nor take variables from a ConfigMap or Secret with an
`envFrom` prefix that can spell one (`NVIDIA_`, `NV`, ...). Keys of ConfigMaps and
Secrets with those names are judged where they are written (webhook.engine.env_keys),
and again at the CREATE of a pod taking them with an `envFrom` without a prefix
(webhook.engine.env_references), for objects written before the namespace opted in.
Values are never read or echoed.
"""

from __future__ import annotations

from collections.abc import Iterable

from webhook.engine.decision import Violation, echo
from webhook.engine.env_references import referenced_device_keys
from webhook.engine.pod import Container
from webhook.engine.rules.context import RuleContext
from webhook.engine.rules.device_access import PER_POD_LIMIT
from webhook.engine.rules.reach import may_reach_gpu_node
from webhook.policy.compiled import Policy

RULE = "device-env"


def check(context: RuleContext) -> list[Violation]:
    containers = context.pod.all_containers()
    if not any(_sets_device_env(context.policy, c) for c in containers):
        return []
    if not may_reach_gpu_node(context):
        return []
    found = check_device_env(context.policy, containers)
    objects = context.claims.objects
    found += referenced_device_keys(context.policy, containers, objects, RULE)
    return found[:PER_POD_LIMIT]


def check_device_env(policy: Policy, containers: Iterable[Container]) -> list[Violation]:
    """Also what judges the debug containers added to a running pod."""
    names = policy.device_env
    requested = policy.requested_device_env
    violations: list[Violation] = []
    for container in containers:
        if len(violations) >= PER_POD_LIMIT:
            break  # a pod of thousands of such entries is told of the first few
        for index, entry in enumerate(container.env):
            name = entry.get("name")
            if isinstance(name, str) and name in names:
                violations.append(
                    Violation(
                        RULE,
                        f"{container.describe} sets {name} (spec.{container.list_name}"
                        f"[{container.index}].env[{index}]), which asks the container runtime "
                        f"for devices the scheduler did not assign; remove it",
                    )
                )
        for index, prefix in _env_from_prefixes(container):
            spelled = sorted(n for n in requested if prefix and n.startswith(prefix))
            if spelled:
                violations.append(
                    Violation(
                        RULE,
                        f"{container.describe} takes variables with prefix {echo(prefix)} "
                        f"(spec.{container.list_name}[{container.index}].envFrom[{index}]), "
                        f"which can spell {', '.join(spelled[:3])}"
                        f"{' and more' if len(spelled) > 3 else ''}, variables that ask the "
                        "container runtime for devices; use a prefix none of them starts with",
                    )
                )
    return violations[:PER_POD_LIMIT]


def _sets_device_env(policy: Policy, container: Container) -> bool:
    if container.raw.get("envFrom"):
        return True  # whether a prefix spells one is for check_device_env to say
    names = policy.device_env
    for entry in container.env:
        name = entry.get("name")
        if isinstance(name, str) and name in names:
            return True
    return False


def _env_from_prefixes(container: Container) -> list[tuple[int, str]]:
    sources = container.raw.get("envFrom")
    if not isinstance(sources, list):
        return []
    return [
        (index, source["prefix"])
        for index, source in enumerate(sources)
        if isinstance(source, dict) and isinstance(source.get("prefix"), str)
    ]
