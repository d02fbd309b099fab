"""The webhook of the policy ConfigMap, so that ``kubectl apply`` of a policy the service
cannot load fails with its problems.

Only ConfigMaps of the service's own namespace named ``gpu-admission-policy`` (or
kustomize's ``gpu-admission-policy-<hash>``), at CREATE and UPDATE, never DELETE. The
service answers it itself, not the engine: the check compiles the policy in a worker of
its own and compares its scope with the live configurations (``webhook.http.policy.route``).
It fails open: a stopped or broken service must never stop an operator from applying the
policy that repairs it, and the service keeps its last good policy whatever the
ConfigMap holds.
"""

from __future__ import annotations

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

__all__ = ["POLICY_CONFIGMAP", "VALIDATE_POLICY", "policy_configmap_condition"]

POLICY_CONFIGMAP = "gpu-admission-policy"
"""The name of the ConfigMap the service reads its policy from."""


def policy_configmap_condition(policy: Policy | None = None) -> str:
    """CEL: true for the policy ConfigMap, named as ``install`` and the chart name it or as
    kustomize's configMapGenerator does (the name and a hash of the contents)."""
    return (
        "has(object.metadata.name) && "
        f"(object.metadata.name == '{POLICY_CONFIGMAP}' || "
        f"object.metadata.name.startsWith('{POLICY_CONFIGMAP}-'))"
    )


def names_the_policy(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``policy_configmap_condition``."""
    metadata = request.object.get("metadata") if isinstance(request.object, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str):
        return False
    return name == POLICY_CONFIGMAP or name.startswith(f"{POLICY_CONFIGMAP}-")


VALIDATE_POLICY = Handler(
    "validate-policy",
    mutating=False,
    rules=static(
        ResourceRule("", ("v1",), ("configmaps",), {"CREATE": None, "UPDATE": None}),
    ),
    summary="Refuses a policy ConfigMap the service could not load, with its problems.",
    conditions=(Condition("policy-configmap", policy_configmap_condition, names_the_policy),),
    failure_policy=IGNORE,
    namespaces=OWN_NAMESPACE,
)
