"""Rules: no way to a node's GPUs around the scheduler, through what the runtime honours.

For a pod that can reach a GPU node (see reach.py):

- device-annotations: annotations of the Container Device Interface (`cdi.k8s.io/...`,
  and the NVIDIA NRI plugin's `nvidia.cdi.k8s.io[/...]`) make the runtime inject CDI
  devices such as `nvidia.com/gpu=all`, whatever the pod's resources say. Neither the
  device plugin nor the kubelet puts them on a pod object (they reach the runtime on
  the container's config), so a pod carrying one wrote it by hand. Refused, never
  removed: a mutation only runs at a class pod's CREATE, and a refusal says why.
- device-mounts: a mount whose path, cleaned, starts with
  `/var/run/nvidia-container-devices` is a device request under the toolkit's
  volume-mounts strategy, read before the environment (so the injected
  `NVIDIA_VISIBLE_DEVICES=void` does not help). The toolkit matches the string, not
  the folder: `/var/run/nvidia-container-devicesall` asks for every GPU and
  `/var/run/nvidia-container-devicesimex/0` for an IMEX channel, so any path of a
  container, debug containers included, that starts so is refused (and the same under
  `/run`, which nodes link to `/var/run`). A hostPath of the GPUs' device
  nodes (`/dev/nvidia*`, `/dev/dri`), of the CDI specs and the toolkit's state, or of a
  folder holding them (`/`, `/dev`, `/run`, ...) hands the container the node's devices.
- privileged-containers: a privileged container gets every device of the host from
  containerd and CRI-O unless they are configured otherwise, and the toolkit treats
  CAP_SYS_ADMIN as privileged. The GPU Operator's own pods run outside opted-in
  namespaces; any other the platform needs is named in the policy's `exemptions`, or
  the rule set to warn or audit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.engine.decision import Violation, echo
from webhook.engine.pod import Container, PodView
from webhook.engine.rules.context import RuleContext, Standing
from webhook.engine.rules.host_paths import allowed_folder, host_path_volumes, normal_path
from webhook.engine.rules.reach import may_reach_gpu_node
from webhook.policy.compiled import Policy

ANNOTATIONS = "device-annotations"
MOUNTS = "device-mounts"
PRIVILEGED = "privileged-containers"

CDI_DOMAIN = "cdi.k8s.io"
"""Annotations whose key's domain is this or ends with `.cdi.k8s.io` ask for CDI devices."""
CDI_KEY_PATTERN = r"^([^/]*\.)?cdi\.k8s\.io(/|$)"
"""The same, as the RE2 pattern the webhooks' CEL matches keys with."""

DEVICE_LIST_NAME = "nvidia-container-devices"
DEVICE_LIST_PREFIXES = (f"/var/run/{DEVICE_LIST_NAME}", f"/run/{DEVICE_LIST_NAME}")
"""What a cleaned mount path that the toolkit's volume-mounts strategy reads as a device
request starts with (a string prefix, as the toolkit compares it)."""

DEVICE_HOST_PATHS = (
    "/dev/dri",
    "/var/run/nvidia-container-devices",
    "/run/nvidia-container-devices",
    "/var/run/cdi",
    "/run/cdi",
    "/etc/cdi",
    "/run/nvidia",
    "/var/run/nvidia",
    "/etc/nvidia-container-runtime",
    "/etc/nvidia-container-toolkit",
)
"""Host folders of GPU devices, CDI specs and the NVIDIA stack's state; a hostPath of one,
inside one, or of a folder holding one is refused (and of any `/dev/nvidia*` node)."""

DEVICE_NODE_PREFIX = "/dev/nvidia"

STACK_HOST_PATHS = (
    # Container runtimes: their sockets start containers with any device of the node.
    "/run/containerd",  # containerd's socket (containerd.sock) and its shims'
    "/var/run/containerd",
    "/run/k3s/containerd",  # k3s and RKE2 run their own containerd here
    "/var/lib/containerd",
    "/run/crio",  # CRI-O's socket (crio.sock)
    "/var/run/crio",
    "/run/docker.sock",  # Docker's socket
    "/var/run/docker.sock",
    "/run/docker",
    "/var/run/docker",
    "/var/lib/docker",
    "/run/cri-dockerd.sock",  # cri-dockerd, Docker behind the CRI
    "/var/run/cri-dockerd.sock",
    "/run/podman",
    "/var/run/podman",
    # The kubelet: device plugins register and answer on these sockets; pod-resources
    # tells which pod holds which GPU; DRA drivers' plugins serve under plugins/.
    "/var/lib/kubelet/device-plugins",
    "/var/lib/kubelet/pod-resources",
    "/var/lib/kubelet/plugins",
    "/var/lib/kubelet/plugins_registry",
    # The NVIDIA stack: MPS's control pipes (CUDA's default, and the device plugin's),
    # nvidia-persistenced's socket, Fabric Manager's and IMEX's state and configuration.
    "/tmp/nvidia-mps",
    "/run/nvidia-persistenced",
    "/var/run/nvidia-persistenced",
    "/run/nvidia-fabricmanager",
    "/var/run/nvidia-fabricmanager",
    "/usr/share/nvidia/nvswitch",
    "/etc/nvidia-imex",
    "/run/nvidia-imex",
    "/var/run/nvidia-imex",
)
"""Host sockets and folders of what starts containers and hands out GPUs: the container
runtimes, the kubelet's device-plugin, pod-resources and DRA plugin sockets, the NVIDIA
stack's own (`/run/nvidia` holds the GPU Operator's MPS pipes and driver, in
DEVICE_HOST_PATHS). A hostPath of one, inside one, or of a folder holding one is refused
for every pod judged, whether or not it can reach a GPU node: from a runtime's socket a
pod starts containers anywhere the runtime runs them, and Pod Security `baseline`, which
forbids hostPath, may not be enforced in the namespace."""

STACK_WHY = (
    "a socket or folder of the node's container runtime, kubelet device plugins or NVIDIA "
    "stack, from which a container can start others with any GPU of the node or take GPUs "
    "the scheduler assigned to other pods"
)
DEVICES_WHY = "which hands the container GPUs the scheduler did not assign"

CAPABILITIES = frozenset({"SYS_ADMIN", "CAP_SYS_ADMIN", "ALL", "CAP_ALL"})
"""Added capabilities the toolkit counts as privileged (ALL holds SYS_ADMIN)."""

PER_POD_LIMIT = 3
"""Most findings of one rule a message names; a pod with hundreds names three."""


def check_annotations(context: RuleContext) -> list[Violation]:
    annotations = _mapping(_mapping(context.pod.raw.get("metadata")).get("annotations"))
    if not annotations:
        return []
    found = [key for key in annotations if isinstance(key, str) and is_cdi_annotation(key)]
    if not found or not may_reach_gpu_node(context):
        return []
    return [
        Violation(
            ANNOTATIONS,
            f"pod has annotation {echo(key)}, which asks the container runtime for CDI devices "
            "(such as nvidia.com/gpu=all) the scheduler did not assign; remove it and request "
            f"{context.policy.gpu_resource} instead",
        )
        for key in found[:PER_POD_LIMIT]
    ]


def check_mounts(context: RuleContext) -> list[Violation]:
    pod = context.pod
    label = context.label if context.standing is Standing.KNOWN_CLASS else None
    host_paths = _unallowed(context.policy, label, pod)
    stack = [
        f"hostPath volume {echo(name)} mounts {echo(path)} of the node, {STACK_WHY}"
        for name, path in host_paths.items()
        if _is_stack_host_path(path) and not _is_device_host_path(path)
    ]
    devices = [
        *(
            f"hostPath volume {echo(name)} mounts {echo(path)} of the node, {DEVICES_WHY}"
            for name, path in host_paths.items()
            if _is_device_host_path(path)
        ),
        *(f"{what}, {DEVICES_WHY}" for what in device_list_mounts(pod.all_containers())),
    ]
    if devices and not may_reach_gpu_node(context):
        devices = []
    return _mount_violations([*devices, *stack])


def _mount_violations(found: list[str]) -> list[Violation]:
    return [Violation(MOUNTS, f"{what}; remove it") for what in found[:PER_POD_LIMIT]]


def _unallowed(policy: Policy, label: str | None, pod: PodView) -> dict[str, str]:
    """The hostPath volumes of `pod` outside the folders its class (or the policy) allows:
    an allowed folder is the operator's word that the pods need it (MPS's pipes, say)."""
    return {
        name: path
        for name, path in host_path_volumes(pod.spec.get("volumes")).items()
        if allowed_folder(policy, label, path) is None
    }


def debug_container_mounts(
    policy: Policy, pod: PodView, debug: Iterable[Container]
) -> list[Violation]:
    """What judges the mounts of debug containers added to a running pod: a path the
    toolkit reads as a device request, and any volume of the pod's (judged or not when
    it was created) that holds the node's devices, outside what the policy allows."""
    debug = tuple(debug)
    refused = {
        name: (path, DEVICES_WHY if _is_device_host_path(path) else STACK_WHY)
        for name, path in _unallowed(policy, pod.labels.get(policy.workload_label), pod).items()
        if _is_device_host_path(path) or _is_stack_host_path(path)
    }
    found = [f"{what}, {DEVICES_WHY}" for what in device_list_mounts(debug)]
    for container in debug:
        mounts = container.raw.get("volumeMounts")
        for index, mount in enumerate(mounts if isinstance(mounts, list) else []):
            name = mount.get("name") if isinstance(mount, dict) else None
            if isinstance(name, str) and name in refused:
                path, why = refused[name]
                found.append(
                    f"{container.describe} mounts hostPath volume {echo(name)} of the node's "
                    f"{echo(path)} (spec.{container.list_name}[{container.index}]"
                    f".volumeMounts[{index}]), {why}"
                )
    return _mount_violations(found)


def check_privileged(context: RuleContext) -> list[Violation]:
    found = privileged_containers(context.pod.all_containers())
    if not found or not may_reach_gpu_node(context):
        return []
    return found


def privileged_containers(containers: Iterable[Container]) -> list[Violation]:
    """Also what judges the debug containers added to a running pod."""
    violations: list[Violation] = []
    for container in containers:
        security = container.raw.get("securityContext")
        if not security or not isinstance(security, dict):
            continue
        if security.get("privileged") is True:
            why = "is privileged (securityContext.privileged: true)"
        elif shown := _admin_capability(security.get("capabilities")):
            why = f"adds capability {echo(shown)}, which the NVIDIA runtime treats as privileged"
        else:
            continue
        if len(violations) == PER_POD_LIMIT:
            break
        violations.append(
            Violation(
                PRIVILEGED,
                f"{container.describe} {why}: the container runtime can give it every device "
                "of the node, every GPU included; remove it, or have the policy exempt the pod "
                "(exemptions) if it is the platform's own",
            )
        )
    return violations


def _admin_capability(capabilities: Any) -> str | None:
    """The first capability added that holds CAP_SYS_ADMIN, as written."""
    added = capabilities.get("add") if isinstance(capabilities, dict) else None
    if not added or not isinstance(added, list):
        return None
    return next((c for c in added if isinstance(c, str) and c.upper() in CAPABILITIES), None)


def is_cdi_annotation(key: str) -> bool:
    """Whether an annotation's key asks the runtime for CDI devices."""
    if CDI_DOMAIN not in key:
        return False
    domain = key.split("/", 1)[0]
    return domain == CDI_DOMAIN or domain.endswith("." + CDI_DOMAIN)


def stack_folders_held(folder: str) -> list[str]:
    """The device and stack folders `folder` holds (strictly): what allowing it would
    hand a pod besides what it names."""
    known = (*DEVICE_HOST_PATHS, DEVICE_NODE_PREFIX, *STACK_HOST_PATHS)
    return [path for path in known if path.startswith(folder + "/")]


def named_by_device_mounts(path: str) -> bool:
    """Whether device-mounts refuses a hostPath of `path` (outside an allowed folder):
    host-access then says nothing more of it."""
    return _is_device_host_path(path) or _is_stack_host_path(path)


def _is_device_host_path(path: str) -> bool:
    normal = normal_path(path)
    if normal.startswith(DEVICE_NODE_PREFIX) or normal == "/":
        return True
    return _in_or_holding(normal, (*DEVICE_HOST_PATHS, DEVICE_NODE_PREFIX))


def _is_stack_host_path(path: str) -> bool:
    return _in_or_holding(normal_path(path), STACK_HOST_PATHS)


def _in_or_holding(normal: str, paths: tuple[str, ...]) -> bool:
    """Whether `normal` is one of `paths`, inside one, or a folder holding one."""
    return any(
        normal == known or normal.startswith(known + "/") or known.startswith(normal + "/")
        for known in paths
    )


def device_list_mounts(containers: Iterable[Container]) -> list[str]:
    """The mounts the toolkit reads as device requests, each said as a finding; also
    what judges the debug containers added to a running pod."""
    found = []
    for container in containers:
        mounts = container.raw.get("volumeMounts")
        if not mounts or not isinstance(mounts, list):
            continue
        for index, mount in enumerate(mounts):
            path = mount.get("mountPath") if isinstance(mount, dict) else None
            # Cleaning only drops components: a path without the name cannot start with it.
            if not isinstance(path, str) or DEVICE_LIST_NAME not in path:
                continue
            if normal_path(path).startswith(DEVICE_LIST_PREFIXES):
                found.append(
                    f"{container.describe} mounts a volume at {echo(path)} (spec."
                    f"{container.list_name}[{container.index}].volumeMounts[{index}]), a "
                    "device request of the NVIDIA runtime's volume-mounts strategy"
                )
    return found


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}
