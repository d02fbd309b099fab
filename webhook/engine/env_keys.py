"""ConfigMaps and Secrets judged by their key names where they are written.

A container's `envFrom` turns every key of a ConfigMap or Secret into a variable of that
name. A key named NVIDIA_VISIBLE_DEVICES (or another variable the runtime reads as a
device request, `Policy.requested_device_env`) would so ask the NVIDIA runtime for GPUs
the scheduler never assigned, and what a ConfigMap or Secret holds is not in the pod
under review. So the key is refused where it is written: at the CREATE and UPDATE of a
ConfigMap or Secret in a namespace that opted in (the webhook's condition sends only
those holding such a key). Only key names are read, judged and named; a value is never
read, echoed or logged. The rule is device-env, with its mode.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.engine.decision import Decision, Violation, allow, echo, judge, subject
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules.device_env import RULE
from webhook.engine.rules.registry import with_modes
from webhook.policy.compiled import Policy

KINDS = ("ConfigMap", "Secret")
KEY_FIELDS = ("data", "binaryData", "stringData")


def env_keys_kind(request: AdmissionRequest) -> str | None:
    """``ConfigMap`` or ``Secret`` for the CREATE or UPDATE of one; else None."""
    if request.group != "" or request.kind not in KINDS or request.subresource:
        return None
    if request.operation not in ("CREATE", "UPDATE"):
        return None
    return request.kind


def judge_env_keys(policy: Policy, request: AdmissionRequest) -> Decision:
    """Refuse a ConfigMap or Secret holding a key `envFrom` would make a device request."""
    kind = env_keys_kind(request)
    obj = request.object
    if kind is None or not isinstance(obj, Mapping):
        return allow()
    names = policy.requested_device_env
    found = [
        (field, key)
        for field in KEY_FIELDS
        if isinstance(obj.get(field), Mapping)
        for key in obj[field]
        if key in names
    ]
    if not found:
        return allow()
    violations = [
        Violation(
            RULE,
            f"{kind} key {field}.{key} would become variable {key} in any container taking it "
            "with envFrom, which asks the container runtime for devices the scheduler did "
            f"not assign; rename the key (its value is not read)",
        )
        for field, key in found
    ]
    named = subject(kind, request.namespace, request.name, quote=echo)
    return judge(list(with_modes(policy, None, violations)), named)
