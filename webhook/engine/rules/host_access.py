"""Rule host-access: what of the node a pod that can reach a GPU node may use, by
allowance, not by a list of what is forbidden.

A GPU node holds every tenant's GPU processes, the NVIDIA stack's binaries that the
runtime runs as root for every container, the PCI bus of its GPUs and the kubelet's
credentials. A pod of such a node gets none of it unless the policy allows it:

- a hostPath volume only of a folder of `hostAccess.paths` (the policy's, and for a
  class's pods the class's too), or inside one; read-only unless the folder is allowed
  with `readOnly: false`, so every container mounting it sets `readOnly: true`;
- `hostNetwork`, `hostPID` and `hostIPC` only where `hostAccess` sets them true (RDMA
  setups use the node's network, MPS clients its IPC).

Pod Security's `baseline` forbids all of these; opting a namespace in must not be a bet
that it is enforced there. What device-mounts refuses (the runtime's sockets, the GPUs'
device nodes) stays refused outside an allowed folder: see device_access.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from webhook.engine.decision import Violation, echo
from webhook.engine.pod import Container, PodView
from webhook.engine.rules.context import RuleContext, Standing
from webhook.engine.rules.device_access import named_by_device_mounts, stack_folders_held
from webhook.engine.rules.host_paths import allowance, host_path_volumes, normal_path
from webhook.engine.rules.reach import may_reach_gpu_node
from webhook.errors import PolicyError
from webhook.policy.compiled import HostAccess, Policy

RULE = "host-access"

PER_POD_LIMIT = 3
"""Most findings a message names; a pod with hundreds names three."""

HOST_NAMESPACES = (
    ("hostNetwork", "host_network", "the node's network namespace"),
    ("hostPID", "host_pid", "every process of the node, other tenants' CUDA processes included"),
    ("hostIPC", "host_ipc", "the node's IPC namespace and shared memory"),
)
"""(pod field, HostAccess attribute, what it gives the pod)."""


def refuse_folders_holding_the_stack(policy: Policy) -> None:
    """Raise PolicyError for an allowed folder holding the runtime's sockets or the GPUs'
    device nodes (`/run`, `/dev`, `/var/lib/kubelet`): allowing it would allow them."""
    allowances = [("hostAccess.paths", policy.host_access)] + [
        (f"classes.{name}.hostAccess.paths", c.host_access) for name, c in policy.classes.items()
    ]
    for where, access in allowances:
        for folder in access.paths:
            held = stack_folders_held(folder)
            if held:
                raise PolicyError(
                    policy.source,
                    where,
                    f"{folder!r} holds {', '.join(repr(h) for h in held[:3])}, from which a "
                    "pod takes GPUs the scheduler did not assign or starts containers: allow "
                    "the folders the pods need inside it instead",
                )


def check(context: RuleContext) -> list[Violation]:
    label = context.label if context.standing is Standing.KNOWN_CLASS else None
    access, whose = allowance(context.policy, label)
    found = [
        *_host_namespaces(context.pod, access, whose),
        *_host_paths(context.pod, access, whose),
    ]
    if not found or not may_reach_gpu_node(context):
        return []
    return [Violation(RULE, message) for message in found[:PER_POD_LIMIT]]


def debug_host_mounts(policy: Policy, pod: PodView, debug: Iterable[Container]) -> list[Violation]:
    """What judges the debug containers added to a running pod: a hostPath volume of the
    pod's mounted outside what the allowance lets them (a pod admitted before its
    namespace opted in may hold one), or writable where it is allowed read-only."""
    access, whose = allowance(policy, pod.labels.get(policy.workload_label))
    volumes = host_path_volumes(pod.spec.get("volumes"))
    found = [
        _mount_finding(container, index, mount, volumes[name], access, whose)
        for container, index, mount, name in _mounts(debug, volumes)
        if not named_by_device_mounts(volumes[name])
        or access.folder_of(normal_path(volumes[name])) is not None
    ]
    return [Violation(RULE, f) for f in found if f is not None][:PER_POD_LIMIT]


def _host_namespaces(pod: PodView, access: HostAccess, whose: str) -> Iterator[str]:
    for field, attribute, gives in HOST_NAMESPACES:
        if pod.spec.get(field) is True and not getattr(access, attribute):
            yield (
                f"pod sets {field}: true, which gives it {gives}; {whose} does not allow "
                f"it: remove it, or set {field}: true in hostAccess (the class's, for the "
                "pods of one class) if the pods need it"
            )


def _host_paths(pod: PodView, access: HostAccess, whose: str) -> Iterator[str]:
    volumes = host_path_volumes(pod.spec.get("volumes"))
    for name, path in volumes.items():
        if access.folder_of(normal_path(path)) is None and not named_by_device_mounts(path):
            yield _unallowed(name, path, access, whose)
    for container, index, mount, name in _mounts(pod.all_containers(), volumes):
        if access.folder_of(normal_path(volumes[name])) is None:
            continue  # the volume is named once, above
        finding = _mount_finding(container, index, mount, volumes[name], access, whose)
        if finding is not None:
            yield finding


def _unallowed(name: str, path: str, access: HostAccess, whose: str) -> str:
    allowed = ", ".join(sorted(access.paths)) or "none"
    return (
        f"hostPath volume {echo(name)} mounts {echo(path)} of the node, which {whose} does "
        f"not allow (folders allowed: {allowed}); use a volume of the pod's own "
        "(emptyDir, a PersistentVolumeClaim), or add the folder to hostAccess.paths if the "
        "pods need the node's"
    )


def _mount_finding(
    container: Container,
    index: int,
    mount: Mapping[str, Any],
    path: str,
    access: HostAccess,
    whose: str,
) -> str | None:
    """What is wrong with one container's mount of a hostPath volume of `path`."""
    where = f"spec.{container.list_name}[{container.index}].volumeMounts[{index}]"
    name = mount.get("name")
    held = access.folder_of(normal_path(path))
    if held is None:
        return (
            f"{container.describe} mounts hostPath volume {echo(name)} of the node's "
            f"{echo(path)} ({where}), which {whose} does not allow"
        )
    folder, writable = held
    if writable or mount.get("readOnly") is True:
        return None
    return (
        f"{container.describe} mounts hostPath volume {echo(name)} of the node's {echo(path)} "
        f"writable ({where}); {whose} allows {echo(folder)} read-only: set readOnly: true, "
        "or allow the folder with readOnly: false"
    )


def _mounts(
    containers: Iterable[Container], volumes: Mapping[str, str]
) -> Iterator[tuple[Container, int, Mapping[str, Any], str]]:
    """(container, index, mount, volume name) of each mount of a hostPath volume."""
    for container in containers:
        mounts = container.raw.get("volumeMounts")
        for index, mount in enumerate(mounts if isinstance(mounts, list) else []):
            name = mount.get("name") if isinstance(mount, dict) else None
            if isinstance(name, str) and name in volumes:
                yield container, index, mount, name
