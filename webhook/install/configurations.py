"""The Mutating- and ValidatingWebhookConfiguration of gpu-admission, rendered from a policy
and the handlers of ``webhook.engine.handlers``: one webhook per handler, each reached at
its own path (``/validate-bindings`` for ``validate-bindings.gpu-admission.io``).

One renderer serves the end-to-end tests (clientConfig.url), `install` and the
kustomize base (clientConfig.service), so the scope a cluster sees is the scope
the tests prove:

- namespaces opt in with the policy's label; kube-system, kube-node-lease and
  the service's own namespace are never in scope, so the webhooks cannot block
  the control plane nor their own restart;
- pods carrying the workload label are told apart by an objectSelector, which
  kube-apiserver matches on labels it already has, before any CEL: they are
  always the policy's business, so their webhooks need no matchCondition at
  CREATE (any condition costs kube-apiserver a CEL activation of the whole pod;
  `python -m benchmarks.apiserver --profile DIR` shows it), and their updates go
  to a webhook of their own. Pods without the label go to webhooks of their own
  whose matchCondition (CEL) sends only those the policy can have an opinion on:
  a `nvidia.com/` resource, a toleration that could match a GPU pool's taint,
  the visible-devices variable, a node named by hand, or a PriorityClass of the
  policy's classes. Every other pod is admitted without calling us, even when
  we are down;
- class pods are mutated at CREATE, and any pod in scope when debug containers
  are added (the `ephemeralcontainers` subresource, to hide the node's GPUs from
  them); pods are validated at CREATE, when debug containers are added, and at
  UPDATEs that change where they can land (tolerations; selector, affinity and
  gates of a gated pod);
- workloads (Deployment ... CronJob, and the policy's kinds such as PyTorchJob)
  go to a validating webhook of their own, at CREATE and UPDATE, whose
  condition looks for the same markers in their pod templates
  (webhook.engine.handlers.template_conditions). Rules for kinds a cluster does not serve are
  accepted by kube-apiserver and simply never match;
- autoscalers (HorizontalPodAutoscaler, KEDA ScaledObject) go to a validating
  webhook that only ever warns (webhook.engine.autoscalers): it fails open and
  sends every autoscaler of an opted-in namespace, since whether one scales GPU
  pods is only known from its target;
- pods' bindings (``pods/binding``, kube-scheduler's last write before a kubelet runs
  the pod) go to a validating webhook of their own, which reads the pod and judges it
  again against its ResourceClaims as allocated (webhook.engine.binding): a claim can
  be deleted and made again under its name until then. A Binding carries no labels
  nor anything of the pod, so every binding of an opted-in namespace is sent, and,
  failing closed, a stopped service holds the scheduling of that namespace's pods
  until it is back (they wait in the scheduler's queue, none is lost);
- the policy ConfigMap goes to a validating webhook of its own (``/validate-policy``),
  so `kubectl apply` of a policy the service cannot load fails with its problems:
  only ConfigMaps of the service's own namespace named `gpu-admission-policy` (or
  kustomize's `gpu-admission-policy-<hash>`), at CREATE and UPDATE, never DELETE. It
  fails open: a stopped or broken service must never stop an operator from applying
  the policy that repairs it, and the service keeps its last good policy whatever
  the ConfigMap holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhook.engine.handlers import HANDLERS, Handler, HandlerRegistry
from webhook.engine.handlers.autoscalers import AUTOSCALER_RULES, WARN_AUTOSCALERS
from webhook.engine.handlers.bindings import VALIDATE_BINDINGS
from webhook.engine.handlers.cel import (
    SCHEDULING_FIELDS,
    claim_relevance_condition,
    env_key_condition,
    gpu_relevance_condition,
    scheduling_change_condition,
    workload_relevance_condition,
)
from webhook.engine.handlers.claims import VALIDATE_CLAIMS
from webhook.engine.handlers.declaration import OWN_NAMESPACE
from webhook.engine.handlers.env_keys import VALIDATE_ENV_KEYS
from webhook.engine.handlers.pods import (
    MUTATE,
    MUTATE_UNCLASSED,
    VALIDATE,
    VALIDATE_UNCLASSED,
    VALIDATE_UPDATES,
)
from webhook.engine.handlers.policy_configmap import VALIDATE_POLICY, policy_configmap_condition
from webhook.engine.handlers.workloads import VALIDATE_WORKLOADS
from webhook.install.names import APP_LABELS, NAMESPACE, WEBHOOK_CONFIGURATION
from webhook.policy import Policy

__all__ = [
    "ALWAYS_EXEMPT_NAMESPACES",
    "AUTOSCALER_RULES",
    "AUTOSCALER_WEBHOOK",
    "BINDING_WEBHOOK",
    "CLAIM_WEBHOOK",
    "ENV_KEYS_WEBHOOK",
    "MUTATING_WEBHOOK",
    "POD_UPDATE_WEBHOOK",
    "POLICY_PATH",
    "POLICY_WEBHOOK",
    "SCHEDULING_FIELDS",
    "UNCLASSED_MUTATING_WEBHOOK",
    "UNCLASSED_VALIDATING_WEBHOOK",
    "VALIDATING_WEBHOOK",
    "WORKLOAD_WEBHOOK",
    "Endpoint",
    "claim_relevance_condition",
    "env_key_condition",
    "gpu_relevance_condition",
    "namespace_selector",
    "policy_configmap_condition",
    "render_webhook_configurations",
    "scheduling_change_condition",
    "webhook_of",
    "workload_relevance_condition",
]

MUTATING_WEBHOOK = MUTATE.webhook_name
VALIDATING_WEBHOOK = VALIDATE.webhook_name
UNCLASSED_MUTATING_WEBHOOK = MUTATE_UNCLASSED.webhook_name
UNCLASSED_VALIDATING_WEBHOOK = VALIDATE_UNCLASSED.webhook_name
POD_UPDATE_WEBHOOK = VALIDATE_UPDATES.webhook_name
WORKLOAD_WEBHOOK = VALIDATE_WORKLOADS.webhook_name
AUTOSCALER_WEBHOOK = WARN_AUTOSCALERS.webhook_name
CLAIM_WEBHOOK = VALIDATE_CLAIMS.webhook_name
BINDING_WEBHOOK = VALIDATE_BINDINGS.webhook_name
ENV_KEYS_WEBHOOK = VALIDATE_ENV_KEYS.webhook_name
POLICY_WEBHOOK = VALIDATE_POLICY.webhook_name
POLICY_PATH = VALIDATE_POLICY.path
ALWAYS_EXEMPT_NAMESPACES = ("kube-system", "kube-node-lease")


@dataclass(frozen=True)
class Endpoint:
    """Where kube-apiserver reaches the service: a URL, or a Service in the cluster."""

    ca_bundle: str
    url: str | None = None
    service_name: str | None = None
    service_namespace: str | None = None
    service_port: int = 443

    def client_config(self, path: str) -> dict[str, Any]:
        config: dict[str, Any] = {"caBundle": self.ca_bundle}
        if self.url is not None:
            config["url"] = self.url.rstrip("/") + path
        else:
            config["service"] = {
                "name": self.service_name,
                "namespace": self.service_namespace,
                "path": path,
                "port": self.service_port,
            }
        return config


TIMEOUT_SECONDS = 3
"""Each webhook's timeoutSeconds as shipped: well inside the 10 s kube-apiserver allows a
request, so that a stalled replica fails one review, not the client's request."""


def namespace_selector(policy: Policy, own_namespace: str | None) -> dict[str, Any]:
    key, value = policy.namespace_opt_in
    exempt = [*ALWAYS_EXEMPT_NAMESPACES, *([own_namespace] if own_namespace else [])]
    return {
        "matchExpressions": [
            {"key": key, "operator": "In", "values": [value]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt},
        ]
    }


def _scope(handler: Handler, policy: Policy, own_namespace: str | None) -> dict[str, Any]:
    """The namespaces a webhook is called for: those opted in, or the service's own."""
    if handler.namespaces == OWN_NAMESPACE:
        own = own_namespace or NAMESPACE
        return {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [own]}
            ]
        }
    return namespace_selector(policy, own_namespace)


def webhook_of(
    handler: Handler,
    policy: Policy,
    endpoint: Endpoint,
    own_namespace: str | None = None,
    timeout_seconds: int = TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """The entry of one handler in its configuration's ``webhooks``, reached at its path."""
    hook: dict[str, Any] = {
        "name": handler.webhook_name,
        "clientConfig": endpoint.client_config(handler.path),
        "rules": [rule.configuration() for rule in handler.rules(policy)],
        "namespaceSelector": _scope(handler, policy, own_namespace),
    }
    if handler.selector is not None:
        hook["objectSelector"] = handler.selector.configuration(policy)
    if handler.conditions:
        hook["matchConditions"] = [c.configuration(policy) for c in handler.conditions]
    hook |= {
        "failurePolicy": handler.failure_policy,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": timeout_seconds,
        "matchPolicy": "Equivalent",
    }
    if handler.mutating:
        # A later webhook's patch (a sidecar injector's container, say) is mutated again.
        hook["reinvocationPolicy"] = "IfNeeded"
    return hook


def render_webhook_configurations(
    policy: Policy,
    endpoint: Endpoint,
    *,
    name: str = WEBHOOK_CONFIGURATION,
    own_namespace: str | None = None,
    timeout_seconds: int = TIMEOUT_SECONDS,
    handlers: HandlerRegistry = HANDLERS,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (mutating, validating) configuration objects, one webhook per handler of
    `handlers`. The policy ConfigMap's webhook looks in `own_namespace` (the install's
    namespace when None)."""

    def webhooks(side: tuple[Handler, ...]) -> list[dict[str, Any]]:
        return [webhook_of(h, policy, endpoint, own_namespace, timeout_seconds) for h in side]

    metadata = {"name": name, "labels": dict(APP_LABELS)}
    return (
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": metadata,
            "webhooks": webhooks(handlers.mutating()),
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": dict(metadata),
            "webhooks": webhooks(handlers.validating()),
        },
    )
