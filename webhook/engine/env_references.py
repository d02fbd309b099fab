"""The ConfigMaps and Secrets a pod's containers take whole, judged at the pod's CREATE.

A container's ``envFrom`` without a prefix turns every key of a ConfigMap or Secret into
a variable of that name, after the device plugin's: a key NVIDIA_VISIBLE_DEVICES there
asks the runtime for every GPU of the node. Such keys are refused where they are written
(``webhook.engine.env_keys``), but a ConfigMap written before the namespace opted in, or
before the service was installed, was never judged. So the pod's CREATE names the
objects it takes this way (``env_sources``), the service reads their key names (only
the names: ``webhook.kube.claims`` drops the values as it reads), and rule device-env
judges them (``referenced_device_keys``). An object that does not exist yet is judged
when it is written, as any object written later is; one that could not be read refuses
the pod (it could be any), with why.

A variable set by ``valueFrom`` has its name in the pod, judged there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.engine.decision import Unjudged, Violation, echo
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.engine.pod import Container
from webhook.policy.compiled import Policy

CONFIG_MAP = "ConfigMap"
SECRET = "Secret"
KEYS = "keys"
"""What the service keeps of a ConfigMap or Secret it reads: its key names, sorted."""

_REFERENCES = {"configMapRef": CONFIG_MAP, "secretRef": SECRET}

MAX_REFERENCES = 32
"""Most objects read for one pod's envFrom: a pod naming more is told of the first."""


def taken_whole(container: Mapping[str, Any]) -> list[tuple[int, ClaimSource]]:
    """The ConfigMaps and Secrets `container` (as JSON) takes with ``envFrom`` and no
    prefix, with the index of each entry."""
    entries = container.get("envFrom")
    found: list[tuple[int, ClaimSource]] = []
    for index, entry in enumerate(entries if isinstance(entries, list) else ()):
        if not isinstance(entry, dict) or entry.get("prefix"):
            continue  # a prefix is judged in the pod (rule device-env)
        for field, kind in _REFERENCES.items():
            reference = entry.get(field)
            name = reference.get("name") if isinstance(reference, dict) else None
            if isinstance(name, str) and name:
                found.append((index, ClaimSource(kind, name)))
    return found


def env_sources(obj: Any) -> tuple[ClaimSource, ...]:
    """The ConfigMaps and Secrets the containers of pod `obj` take whole, each once."""
    spec = obj.get("spec") if isinstance(obj, dict) else None
    found: dict[ClaimSource, None] = {}
    for field in ("initContainers", "containers", "ephemeralContainers"):
        containers = spec.get(field) if isinstance(spec, dict) else None
        for container in containers if isinstance(containers, list) else ():
            if isinstance(container, dict):
                found.update((source, None) for _, source in taken_whole(container))
    return tuple(found)[:MAX_REFERENCES]


def key_names(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What is kept of a ConfigMap or Secret as read: ``{"keys": [...]}``, its key names."""
    keys = {key for field in ("data", "binaryData") for key in _mapping(obj.get(field))}
    return {KEYS: sorted(key for key in keys if isinstance(key, str))}


def referenced_device_keys(
    policy: Policy, containers: Iterable[Container], objects: ClaimObjects, rule: str
) -> list[Violation]:
    """A violation of `rule` for each container taking a device variable whole from a
    ConfigMap or Secret, as `objects` holds their key names; an Unjudged one for each
    such object that could not be read. A missing object, or one not looked up (a check
    of files), passes."""
    names = policy.requested_device_env
    violations: list[Violation] = []
    for container in containers:
        for index, source in taken_whole(container.raw):
            where = f"spec.{container.list_name}[{container.index}].envFrom[{index}]"
            what = f"{source.kind} {echo(source.name)}"
            if source in objects.unreadable:
                violations.append(Unjudged(rule, _unread(container, what, where, objects, source)))
                continue
            found = objects.found.get(source)
            keys = found.get(KEYS) if isinstance(found, Mapping) else None
            spelled = sorted(k for k in keys or () if k in names)
            if spelled:
                violations.append(Violation(rule, _taken(container, what, where, spelled)))
    return violations


def _taken(container: Container, what: str, where: str, spelled: list[str]) -> str:
    return (
        f"{container.describe} takes every key of {what} as a variable ({where}), and it "
        f"holds {', '.join(spelled[:3])}, which asks the container runtime for devices the "
        "scheduler did not assign; rename the key, or take the object with a prefix"
    )


def _unread(
    container: Container, what: str, where: str, objects: ClaimObjects, source: ClaimSource
) -> str:
    return (
        f"{container.describe} takes every key of {what} as a variable ({where}), whose "
        f"key names {objects.reason_unknown(source)}, so whether it asks the runtime for "
        "devices is not known; the pod is refused until it can be read (try again)"
    )


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}
