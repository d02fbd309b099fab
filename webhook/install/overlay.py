"""A kustomize overlay that installs deploy/base with a policy of one's own.

The base holds the default policy and what it decides: its ConfigMap, the webhook
configurations rendered from it (the opt-in label in every namespaceSelector, the
workload label, taints and resources in the selectors and CEL) and the PriorityClasses
its classes name. An overlay for another policy must replace each of them, or the
install is silently the default policy's: webhooks that select namespaces by a label
nobody set, classes whose pods are refused because their PriorityClass does not exist.
``overlay_files`` writes all of it from the policy, the way `install` and the chart's
``webhookScope`` derive it:

- ``policy.yaml``, the policy as given, replacing the base's ConfigMap (a
  configMapGenerator, so a change rolls the Deployment);
- ``policy-scope.yaml``, the ConfigMap's scope digest (``webhook.install.scope``);
- ``webhooks.yaml``, a JSON patch per configuration replacing its ``webhooks`` whole (a
  strategic merge would keep conditions of the default policy that the policy has not);
- ``priorityclasses.yaml``, the policy's PriorityClasses the base does not have; those it
  has under the same name are patched to the policy's values, and the base's others are
  deleted from the overlay's output;
- ``flowschema.yaml``, a JSON patch giving the base's FlowSchema the tenant writes the
  policy's webhooks are sent (``webhook.install.flow_control``).
"""

from __future__ import annotations

from typing import Any

import yaml

from webhook.install.flow_control import FLOW_SCHEMA, tenant_write_rules
from webhook.install.manifests import deploy_webhook_configurations, policy_scope_object
from webhook.install.names import APP_LABELS, POLICY_CONFIGMAP, WEBHOOK_CONFIGURATION
from webhook.install.priority_classes import priority_class_objects
from webhook.policy import Policy, load_default_policy

__all__ = ["OVERLAY_FILES", "OVERLAY_HEADER", "flow_control_of", "overlay_files"]

OVERLAY_HEADER = """\
# Written by `gpu-admission manifests overlay --policy {source}`: write it again after
# each edit of the policy (the webhooks and PriorityClasses follow it). Apply with
# `kubectl apply -k DIR`; then `gpu-admission install --policy {source}` or cert-manager
# gives the webhooks their certificates (deploy/README.md).
"""

_FLOW_SCHEMA_TARGET = {
    "group": "flowcontrol.apiserver.k8s.io",
    "version": "v1",
    "kind": "FlowSchema",
    "name": FLOW_SCHEMA,
}
_FLOW_RULES = "/spec/rules/0/resourceRules"

_WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

OVERLAY_FILES = frozenset(
    {
        "kustomization.yaml",
        "policy.yaml",
        "policy-scope.yaml",
        "mutating-webhooks.yaml",
        "validating-webhooks.yaml",
        "priorityclasses.yaml",
        "flowschema.yaml",
    }
)
"""Every file ``overlay_files`` may write: an overlay written again owns these."""


def flow_control_of(base: str) -> str:
    """The base's flowcontrol folder, for a local path or a remote reference whose query
    (``?ref=v1.2``) comes after the path."""
    path, _, query = base.partition("?")
    return f"{path.rstrip('/')}/flowcontrol" + (f"?{query}" if query else "")


def overlay_files(policy: Policy, policy_text: str, base: str) -> dict[str, str]:
    """File name -> text of the overlay of `policy` (whose file holds `policy_text`) over
    the base at `base` (a path relative to the overlay, or a remote reference)."""
    own = priority_class_objects(policy)
    base_classes = {o["metadata"]["name"]: o for o in priority_class_objects(load_default_policy())}
    added = [o for o in own if o["metadata"]["name"] not in base_classes]
    kept = [o for o in own if o["metadata"]["name"] in base_classes]
    dropped = sorted(set(base_classes) - {o["metadata"]["name"] for o in own})
    patches: list[dict[str, Any]] = [
        {"path": "policy-scope.yaml"},
        {"target": _FLOW_SCHEMA_TARGET, "path": "flowschema.yaml"},
    ]
    for kind in _WEBHOOK_KINDS:
        patches.append({"target": _target(kind), "path": _webhooks_file(kind)})
    for obj in kept:
        patches.append({"patch": yaml.safe_dump(obj, sort_keys=False)})
    for name in dropped:
        gone = {
            "$patch": "delete",
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
        }
        patches.append({"patch": yaml.safe_dump(gone, sort_keys=False)})
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base, flow_control_of(base), *(["priorityclasses.yaml"] if added else [])],
        "configMapGenerator": [
            {
                "name": POLICY_CONFIGMAP,
                "behavior": "replace",
                "files": ["policy.yaml"],
                "options": {"labels": dict(APP_LABELS)},
            }
        ],
        "patches": patches,
    }
    header = OVERLAY_HEADER.format(source=policy.source)
    files = {
        "kustomization.yaml": header + yaml.safe_dump(kustomization, sort_keys=False, width=100),
        "policy.yaml": policy_text,
        "policy-scope.yaml": header + yaml.safe_dump(policy_scope_object(policy), sort_keys=False),
    }
    rules = [{"op": "replace", "path": _FLOW_RULES, "value": tenant_write_rules(policy)}]
    files["flowschema.yaml"] = header + yaml.safe_dump(rules, sort_keys=False, width=100)
    for configuration in deploy_webhook_configurations(policy):
        operations = [{"op": "replace", "path": "/webhooks", "value": configuration["webhooks"]}]
        files[_webhooks_file(configuration["kind"])] = header + yaml.safe_dump(
            operations, sort_keys=False, width=100
        )
    if added:
        files["priorityclasses.yaml"] = header + yaml.safe_dump_all(
            added, sort_keys=False, explicit_start=True
        )
    return files


def _webhooks_file(kind: str) -> str:
    return f"{kind.removesuffix('WebhookConfiguration').lower()}-webhooks.yaml"


def _target(kind: str) -> dict[str, str]:
    return {
        "group": "admissionregistration.k8s.io",
        "version": "v1",
        "kind": kind,
        "name": WEBHOOK_CONFIGURATION,
    }
