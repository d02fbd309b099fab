"""The webhook of the policy ConfigMap, so that ``kubectl apply`` of a policy the service
cannot load fails with its problems.

Only ConfigMaps of the service's own namespace named ``gpu-admission-policy`` (or
kustomize's ``gpu-admission-policy-<hash>``), at CREATE and UPDATE, never DELETE; an
install that names its objects otherwise (the chart's ``fullnameOverride``) declares
the same webhook for its own name with ``validate_policy``. The
service answers it itself, not the engine: the check compiles the policy in a worker of
its own and compares its scope with the live configurations (``webhook.http.policy.route``).
It fails open: a stopped or broken service must never stop an operator from applying the
policy that repairs it, and the service keeps its last good policy whatever the
ConfigMap holds.
"""

from __future__ import annotations

import functools

from webhook.engine.handlers.declaration import (
    IGNORE,
    OWN_NAMESPACE,
    Condition,
    Handler,
    ResourceRule,
    static,
)
from webhook.engine.request import AdmissionRequest
from webhook.policy.compiled import Policy

__all__ = [
    "POLICY_CONFIGMAP",
    "VALIDATE_POLICY",
    "policy_configmap_condition",
    "validate_policy",
]

POLICY_CONFIGMAP = "gpu-admission-policy"
"""The name of the ConfigMap the service reads its policy from."""


def policy_configmap_condition(policy: Policy | None = None, name: str = POLICY_CONFIGMAP) -> str:
    """CEL: true for the policy ConfigMap `name`, named as ``install`` and the chart name it
    or as kustomize's configMapGenerator does (the name and a hash of the contents)."""
    return (
        "has(object.metadata.name) && "
        f"(object.metadata.name == '{name}' || "
        f"object.metadata.name.startsWith('{name}-'))"
    )


def names_the_policy(
    policy: Policy, request: AdmissionRequest, name: str = POLICY_CONFIGMAP
) -> bool:
    """Twin of ``policy_configmap_condition``."""
    metadata = request.object.get("metadata") if isinstance(request.object, dict) else None
    found = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(found, str):
        return False
    return found == name or found.startswith(f"{name}-")


def validate_policy(configmap: str = POLICY_CONFIGMAP) -> Handler:
    """The policy ConfigMap's webhook, for the ConfigMap named `configmap`."""
    condition = Condition(
        "policy-configmap",
        functools.partial(policy_configmap_condition, name=configmap),
        functools.partial(names_the_policy, name=configmap),
    )
    return Handler(
        "validate-policy",
        mutating=False,
        rules=static(
            ResourceRule("", ("v1",), ("configmaps",), {"CREATE": None, "UPDATE": None}),
        ),
        summary="Refuses a policy ConfigMap the service could not load, with its problems.",
        conditions=(condition,),
        failure_policy=IGNORE,
        namespaces=OWN_NAMESPACE,
    )


VALIDATE_POLICY = validate_policy()
