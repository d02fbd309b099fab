"""The FlowSchema that shapes every tenant write reaching a webhook, from the policy.

Every tenant reaches the service from kube-apiserver's one address, so only
kube-apiserver can tell one tenant's burst from another's request: its API Priority
and Fairness queues the writes a FlowSchema matches at a priority level of their own,
one flow per namespace. The writes to shape are exactly those the webhook
configurations send (pods and debug containers, the built-in workloads and the
policy's kinds, claims, ConfigMaps and Secrets, autoscalers), so the FlowSchema's rules
are written from the configurations rendered for the policy, as the webhooks are: a
kind added to ``workloadKinds`` is shaped by the install that sends it.

The policy ConfigMap's webhook is left out: only the release's namespace writes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.policy import Policy

__all__ = [
    "FLOW_CONTROL_HEADER",
    "FLOW_SCHEMA",
    "flow_control_objects",
    "flow_control_yaml",
    "tenant_write_rules",
]

FLOW_SCHEMA = "gpu-admission-tenant-writes"
"""The name of the PriorityLevelConfiguration and of the FlowSchema."""

VERBS = {"CREATE": ("create",), "UPDATE": ("update", "patch"), "DELETE": ("delete",)}
"""The verbs of the requests kube-apiserver sends a webhook for each operation."""

ALL_VERBS = ("create", "update", "patch", "delete")

_ANY_ENDPOINT = Endpoint(ca_bundle="", url="https://flow-control.invalid")
_POLICY_WEBHOOK = "validate-policy.gpu-admission.io"

FLOW_CONTROL_HEADER = """\
# Tenants' writes shaped by kube-apiserver's API Priority and Fairness, before any
# webhook is called: every tenant reaches gpu-admission from kube-apiserver's one
# address, so only kube-apiserver can tell one tenant's burst from another's requests.
# The writes every webhook is sent (pods and debug containers, workloads and the
# policy's kinds, claims, ConfigMaps and Secrets, autoscalers) of users and of service
# accounts outside kube-system run at their own priority level, one flow per
# namespace: a namespace's burst queues behind its own requests, fairly shared with
# every other namespace, instead of holding every seat (and every connection to the
# webhooks). The controllers' and the kubelets' writes match earlier FlowSchemas of the
# cluster (kube-controller-manager 800, kube-system-service-accounts 900, system-nodes
# 500) and are left alone. Written from the policy by `gpu-admission manifests sync`;
# see docs/security.md, "One tenant's load".
"""


def tenant_write_rules(policy: Policy) -> list[dict[str, Any]]:
    """The FlowSchema's resourceRules: one per API group, naming every resource (and
    subresource) a webhook of `policy` is sent and the verbs of the operations sent, in
    every namespace. A verb of one resource is matched for the others of its group too:
    shaping a few more of a tenant's writes costs nothing."""
    configurations = render_webhook_configurations(policy, _ANY_ENDPOINT)
    hooks = [h for c in configurations for h in c["webhooks"] if h["name"] != _POLICY_WEBHOOK]
    resources: dict[str, set[str]] = {}
    verbs: dict[str, set[str]] = {}
    for rule in (rule for hook in hooks for rule in hook["rules"]):
        for group in rule["apiGroups"]:
            resources.setdefault(group, set()).update(rule["resources"])
            verbs.setdefault(group, set()).update(_verbs(rule["operations"]))
    return [
        {
            "apiGroups": [group],
            "resources": sorted(resources[group]),
            "verbs": [verb for verb in ALL_VERBS if verb in verbs[group]],
            "namespaces": ["*"],
        }
        for group in sorted(resources)
    ]


def flow_control_objects(
    policy: Policy,
    name: str = FLOW_SCHEMA,
    labels: Mapping[str, str] | None = None,
    *,
    shares: int = 10,
    precedence: int = 1000,
) -> list[dict[str, Any]]:
    """The PriorityLevelConfiguration and FlowSchema named `name` for `policy`."""
    metadata = {"name": name, "labels": dict(labels or {"app.kubernetes.io/name": "gpu-admission"})}
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": metadata,
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": 0,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 64, "handSize": 6, "queueLengthLimit": 50},
                },
            },
        },
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": metadata,
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": precedence,
            "distinguisherMethod": {"type": "ByNamespace"},
            "rules": [
                {
                    "subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                    "resourceRules": tenant_write_rules(policy),
                }
            ],
        },
    }
    return [level, schema]


def flow_control_yaml(policy: Policy) -> str:
    """deploy/base/flowcontrol/flowcontrol.yaml of `policy`."""
    documents = yaml.safe_dump_all(
        flow_control_objects(policy), sort_keys=False, explicit_start=True, width=100
    )
    return FLOW_CONTROL_HEADER + documents


def _verbs(operations: Iterable[str]) -> tuple[str, ...]:
    if "*" in operations:
        operations = VERBS
    return tuple(verb for operation in operations for verb in VERBS.get(operation, ()))
