"""The hostPath volumes of a pod, their paths as the node resolves them, and what of the
node the policy allows a pod (its ``hostAccess``): shared by the rules that judge them,
device-mounts and host-access."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from webhook.engine.decision import echo
from webhook.policy.compiled import HostAccess, Policy


def host_path_volumes(volumes: Any) -> dict[str, str]:
    """Volume name -> hostPath path, of the hostPath volumes of a pod's ``volumes``."""
    found: dict[str, str] = {}
    for volume in volumes if isinstance(volumes, list) else []:
        if not isinstance(volume, dict) or "hostPath" not in volume:
            continue
        host_path = _mapping(volume["hostPath"]).get("path")
        name = volume.get("name")
        if isinstance(host_path, str) and isinstance(name, str):
            found[name] = host_path
    return found


def normal_path(path: str) -> str:
    """The path as the node resolves its dots and slashes (not its symlinks)."""
    normal = posixpath.normpath("/" + path.lstrip("/"))
    return "/" if normal == "//" else normal


def allowance(policy: Policy, label: str | None) -> tuple[HostAccess, str]:
    """What of the node a pod whose class label is `label` may use, and whose allowance
    it is (for messages): its class's, else the policy's."""
    workload = policy.classes.get(label) if label is not None else None
    if workload is None:
        return policy.host_access, "the policy's hostAccess"
    return workload.host_access, f"hostAccess of the policy and of class {echo(workload.name)}"


def allowed_folder(policy: Policy, label: str | None, path: str) -> str | None:
    """The folder of the allowance of a pod of `label` that holds `path`, None for none."""
    held = allowance(policy, label)[0].folder_of(normal_path(path))
    return None if held is None else held[0]


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}
