"""The Mutating- and ValidatingWebhookConfiguration of gpu-admission, rendered from a policy.

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
  (webhook.install.conditions). Rules for kinds a cluster does not serve are
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

from webhook.engine.templates import CONTROLLER_KINDS
from webhook.install.conditions import workload_condition
from webhook.install.names import APP_LABELS, NAMESPACE, POLICY_CONFIGMAP, WEBHOOK_CONFIGURATION
from webhook.policy import Policy

MUTATING_WEBHOOK = "mutate.gpu-admission.io"
VALIDATING_WEBHOOK = "validate.gpu-admission.io"
UNCLASSED_MUTATING_WEBHOOK = "mutate-unclassed.gpu-admission.io"
UNCLASSED_VALIDATING_WEBHOOK = "validate-unclassed.gpu-admission.io"
POD_UPDATE_WEBHOOK = "validate-updates.gpu-admission.io"
WORKLOAD_WEBHOOK = "validate-workloads.gpu-admission.io"
AUTOSCALER_WEBHOOK = "warn-autoscalers.gpu-admission.io"
CLAIM_WEBHOOK = "validate-claims.gpu-admission.io"
BINDING_WEBHOOK = "validate-bindings.gpu-admission.io"
ENV_KEYS_WEBHOOK = "validate-env-keys.gpu-admission.io"
POLICY_WEBHOOK = "validate-policy.gpu-admission.io"
POLICY_PATH = "/validate-policy"
ALWAYS_EXEMPT_NAMESPACES = ("kube-system", "kube-node-lease")

# Fail closed on every webhook that can deny: within its scope (opted-in namespaces, GPU-relevant
# pods), a pod admitted without our mutation would run at priority 0 on no
# pool, and without validation could borrow priorities or see every GPU.
# The narrow scope above is what keeps fail-closed from blocking the cluster.
# Workloads fail closed too: their pods would be refused at creation anyway.
FAILURE_POLICY = "Fail"
# The autoscaler webhook never denies, so failing closed would only block autoscalers.
AUTOSCALER_FAILURE_POLICY = "Ignore"
# The policy webhook guards the ConfigMap that repairs the service: failing closed would
# lock the operator out of that repair exactly when the service is down.
POLICY_FAILURE_POLICY = "Ignore"

AUTOSCALER_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("autoscaling", ("v1", "v2"), "horizontalpodautoscalers"),
    ("keda.sh", ("v1alpha1",), "scaledobjects"),
)
"""(API group, versions, resource) of each autoscaler kind the webhook warns of."""


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


def gpu_relevance_condition(policy: Policy, root: str = "object", *, labelled: bool = True) -> str:
    """CEL: true for a pod (or the pod template at `root`) the policy can have an opinion on.
    With `labelled` False the workload label is left out: the webhook's objectSelector
    has already sent labelled pods elsewhere."""
    env = policy.visible_devices_env
    spec = f"{root}.spec"
    container_lists = ("containers", "initContainers", "ephemeralContainers")
    # Every resource of a GPU domain (nvidia.com/, and those of the policy's other GPU
    # names), so a GPU resource the policy does not know yet still reaches it.
    names = (
        policy.gpu_resource,
        policy.mig_prefix,
        *sorted(policy.other_gpu_resources),
        *sorted(policy.dra_extended_resources),
    )
    domains = dict.fromkeys(name.split("/")[0] + "/" for name in names)
    named_ours = f"exists(r, {' || '.join(f'r.startsWith({d!r})' for d in domains)})"
    resource_checks = " || ".join(
        f"(has({spec}.{lst}) && {spec}.{lst}.exists(c, has(c.resources) && "
        f"((has(c.resources.limits) && c.resources.limits.{named_ours}) || "
        f"(has(c.resources.requests) && c.resources.requests.{named_ours}))))"
        for lst in container_lists[:2]
    )
    env_checks = " || ".join(
        f"(has({spec}.{lst}) && {spec}.{lst}.exists(c, has(c.env) && "
        f"c.env.exists(e, e.name == '{env}')))"
        for lst in container_lists
    )
    # kube-apiserver's DefaultTolerationSeconds plugin gives every pod tolerations
    # for not-ready/unreachable before webhooks run; only tolerations that could
    # match a GPU pool's taint (or every taint) make a pod our business.
    taint_keys = ", ".join(f"'{key}'" for key in dict.fromkeys(t.key for t in policy.gpu_taints))
    toleration_check = (
        f"(has({spec}.tolerations) && {spec}.tolerations.exists(t, "
        f"!has(t.key) || t.key == '' || t.key in [{taint_keys}]))"
    )
    label_check = (
        f"(has({root}.metadata) && has({root}.metadata.labels) && "
        f"'{policy.workload_label}' in {root}.metadata.labels)"
    )
    # A pod bound by hand skips the scheduler and so the pools' taints; only the
    # service knows which nodes are GPU nodes, so every such pod is ours to judge. Only
    # at a pod's CREATE: every pod has a node once scheduled, and its later updates
    # (a debug container, a label) must not all need the service. A template is
    # judged at its workload's CREATE and UPDATE alike, so there it always counts.
    # What a claim asks for is only known from its template or claim: a pod naming any
    # claim is the service's to read.
    claims_check = f"(has({spec}.resourceClaims) && size({spec}.resourceClaims) > 0)"
    bound = f"(has({spec}.nodeName) && {spec}.nodeName != '')"
    bound_check = f"(request.operation == 'CREATE' && {bound})" if root == "object" else bound
    # Only the policy's classes may run at their PriorityClasses, labelled or not.
    classes = ", ".join(f"'{name}'" for name in sorted(policy.governed_priority_classes))
    priority_check = f"(has({spec}.priorityClassName) && {spec}.priorityClassName in [{classes}])"
    spec_checks = " || ".join(
        [resource_checks, toleration_check, env_checks, bound_check, priority_check, claims_check]
    )
    relevant = f"(has({spec}) && ({spec_checks}))"
    return f"{label_check} || {relevant}" if labelled else relevant


SCHEDULING_FIELDS = ("tolerations", "nodeSelector", "affinity", "schedulingGates")
"""What of a pod's spec may change after its CREATE and changes where it can land:
tolerations may be added to any pod; a pod with scheduling gates may get its node
selector and affinity narrowed, and its gates removed."""


def scheduling_change_condition() -> str:
    """CEL: true for anything but an update of a pod itself that leaves where it can land
    as it was; labels, annotations, images and the like are not ours to judge again."""
    changed = " || ".join(
        f"(has(object.spec.{f}) != has(oldObject.spec.{f})) || "
        f"(has(object.spec.{f}) && object.spec.{f} != oldObject.spec.{f})"
        for f in SCHEDULING_FIELDS
    )
    return (
        "request.operation != 'UPDATE' || "
        "(has(request.subResource) && request.subResource != '') || "
        f"{changed}"
    )


def namespace_selector(policy: Policy, own_namespace: str | None) -> dict[str, Any]:
    key, value = policy.namespace_opt_in
    exempt = [*ALWAYS_EXEMPT_NAMESPACES, *([own_namespace] if own_namespace else [])]
    return {
        "matchExpressions": [
            {"key": key, "operator": "In", "values": [value]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": exempt},
        ]
    }


def class_label_selector(policy: Policy, operator: str) -> dict[str, Any]:
    """The pods that carry the workload label (``Exists``) or do not (``DoesNotExist``).

    kube-apiserver matches an objectSelector against the labels it already has, before
    any CEL: a labelled pod is the policy's business whatever else it holds, so its
    webhooks need no matchCondition at its CREATE; only pods without the label are
    looked into for GPU markers. At an UPDATE the webhook is called when the old or the
    new pod matches, so removing the label never slips a pod past both."""
    return {"matchExpressions": [{"key": policy.workload_label, "operator": operator}]}


def _webhook(
    name: str,
    path: str,
    rules: list[dict[str, Any]],
    policy: Policy,
    endpoint: Endpoint,
    own_namespace: str | None,
    timeout_seconds: int,
    conditions: tuple[tuple[str, str], ...] = (),
    object_selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name,
        "clientConfig": endpoint.client_config(path),
        "rules": rules,
        "namespaceSelector": namespace_selector(policy, own_namespace),
    }
    if object_selector is not None:
        hook["objectSelector"] = object_selector
    if conditions:
        hook["matchConditions"] = [{"name": n, "expression": e} for n, e in conditions]
    return hook | {
        "failurePolicy": FAILURE_POLICY,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": timeout_seconds,
        "matchPolicy": "Equivalent",
    }


def _pod_rule(operations: list[str], resource: str = "pods") -> dict[str, Any]:
    return {
        "operations": operations,
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": [resource],
        "scope": "Namespaced",
    }


def workload_rules(policy: Policy) -> list[dict[str, Any]]:
    """CREATE and UPDATE of the built-in controllers and the policy's workload kinds, by group."""
    resources: dict[tuple[str, str], list[str]] = {}
    for kind in CONTROLLER_KINDS:
        resources.setdefault((kind.group, "v1"), []).append(kind.resource)
    for kind in policy.workload_kinds:
        resources.setdefault((kind.group, "*"), []).append(kind.resource)
    return [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [group],
            "apiVersions": [version],
            "resources": names,
            "scope": "Namespaced",
        }
        for (group, version), names in resources.items()
    ]


def autoscaler_rules() -> list[dict[str, Any]]:
    """CREATE and UPDATE of HorizontalPodAutoscalers and KEDA ScaledObjects (not their status)."""
    return [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [group],
            "apiVersions": list(versions),
            "resources": [resource],
            "scope": "Namespaced",
        }
        for group, versions, resource in AUTOSCALER_RULES
    ]


def claim_rules() -> list[dict[str, Any]]:
    """CREATE of ResourceClaimTemplates and ResourceClaims (their specs are immutable)."""
    return [
        {
            "operations": ["CREATE"],
            "apiGroups": ["resource.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["resourceclaimtemplates", "resourceclaims"],
            "scope": "Namespaced",
        }
    ]


def claim_relevance_condition(policy: Policy) -> str:
    """CEL: true for a template or claim with a request of one of the policy's GPU or MIG
    DeviceClasses: claims of other devices never reach the service."""
    classes = ", ".join(f"'{name}'" for name in sorted(policy.dra.device_classes))
    asks = (
        f"(has(r.exactly) && r.exactly.deviceClassName in [{classes}]) || "
        f"(has(r.firstAvailable) && r.firstAvailable.exists(s, s.deviceClassName in [{classes}]))"
    )

    def requested(spec: str) -> str:
        return (
            f"has({spec}.devices) && has({spec}.devices.requests) && "
            f"{spec}.devices.requests.exists(r, {asks})"
        )

    template = f"has(object.spec.spec) && {requested('object.spec.spec')}"
    return (
        f"request.resource.resource == 'resourceclaimtemplates' ? ({template}) : "
        f"({requested('object.spec')})"
    )


def env_key_rules() -> list[dict[str, Any]]:
    """CREATE and UPDATE of ConfigMaps and Secrets: what `envFrom` would turn into variables."""
    return [
        {
            "operations": ["CREATE", "UPDATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps", "secrets"],
            "scope": "Namespaced",
        }
    ]


def env_key_condition(policy: Policy) -> str:
    """CEL: true for a ConfigMap or Secret with a key named as a variable the runtime reads as
    a device request; every other one (nearly all) never reaches the service."""
    names = ", ".join(f"'{name}'" for name in sorted(policy.requested_device_env))
    return " || ".join(
        f"(has(object.{field}) && object.{field}.exists(k, k in [{names}]))"
        for field in ("data", "binaryData", "stringData")
    )


def workload_relevance_condition(policy: Policy) -> str:
    """CEL: true for a workload with a pod template the policy can have an opinion on."""
    return workload_condition(
        (*CONTROLLER_KINDS, *policy.workload_kinds),
        lambda template: gpu_relevance_condition(policy, template),
    )


def policy_configmap_condition() -> str:
    """CEL: true for the policy ConfigMap, named as `install` and the chart name it or as
    kustomize's configMapGenerator does (the name and a hash of the contents)."""
    return (
        "has(object.metadata.name) && "
        f"(object.metadata.name == '{POLICY_CONFIGMAP}' || "
        f"object.metadata.name.startsWith('{POLICY_CONFIGMAP}-'))"
    )


def policy_webhook(endpoint: Endpoint, namespace: str, timeout_seconds: int) -> dict[str, Any]:
    """The webhook of the policy ConfigMap in `namespace`, the service's own: CREATE and
    UPDATE only, failing open (see the module's docstring)."""
    return {
        "name": POLICY_WEBHOOK,
        "clientConfig": endpoint.client_config(POLICY_PATH),
        "rules": [
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
                "scope": "Namespaced",
            }
        ],
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
            ]
        },
        "matchConditions": [
            {"name": "policy-configmap", "expression": policy_configmap_condition()}
        ],
        "failurePolicy": POLICY_FAILURE_POLICY,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": timeout_seconds,
        "matchPolicy": "Equivalent",
    }


def render_webhook_configurations(
    policy: Policy,
    endpoint: Endpoint,
    *,
    name: str = WEBHOOK_CONFIGURATION,
    own_namespace: str | None = None,
    timeout_seconds: int = 3,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The (mutating, validating) configuration objects. The policy ConfigMap's webhook
    looks in `own_namespace` (the install's namespace when None)."""

    def hook(
        name: str,
        path: str,
        rules: list[dict[str, Any]],
        conditions: tuple[tuple[str, str], ...] = (),
        object_selector: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return _webhook(
            name,
            path,
            rules,
            policy,
            endpoint,
            own_namespace,
            timeout_seconds,
            conditions,
            object_selector,
        )

    classed = class_label_selector(policy, "Exists")
    unclassed = class_label_selector(policy, "DoesNotExist")
    gpu_relevant = ("gpu-relevant-pod", gpu_relevance_condition(policy, labelled=False))
    scheduling_changed = ("scheduling-changed", scheduling_change_condition())
    pod_validation_rules = [
        _pod_rule(["CREATE", "UPDATE"]),
        _pod_rule(["UPDATE"], "pods/ephemeralcontainers"),
    ]
    debug_containers_rule = _pod_rule(["UPDATE"], "pods/ephemeralcontainers")
    class_pod_validation_rules = [_pod_rule(["CREATE"]), debug_containers_rule]
    # Class pods are mutated at their CREATE; any pod in scope when debug containers
    # are added (to hide the node's GPUs from them). A pod without the label gets
    # nothing at its CREATE, so it is not sent then.
    mutating_hooks = [
        hook(
            MUTATING_WEBHOOK, "/mutate", [_pod_rule(["CREATE"]), debug_containers_rule], (), classed
        ),
        hook(
            UNCLASSED_MUTATING_WEBHOOK,
            "/mutate",
            [debug_containers_rule],
            (gpu_relevant,),
            unclassed,
        ),
    ]
    for mutating_hook in mutating_hooks:
        mutating_hook["reinvocationPolicy"] = "IfNeeded"
    # A class pod's CREATE (and debug containers) needs no condition at all; its
    # updates go to a webhook of their own, whose condition lets through only those
    # that change where it can land. kube-apiserver builds a CEL activation of the
    # whole pod for any condition, so the CREATE hook has none.
    pods_hook = hook(VALIDATING_WEBHOOK, "/validate", class_pod_validation_rules, (), classed)
    pod_updates_hook = hook(
        POD_UPDATE_WEBHOOK,
        "/validate",
        [_pod_rule(["UPDATE"])],
        (scheduling_changed,),
        classed,
    )
    unclassed_pods_hook = hook(
        UNCLASSED_VALIDATING_WEBHOOK,
        "/validate",
        pod_validation_rules,
        (gpu_relevant, scheduling_changed),
        unclassed,
    )
    workload_hook = hook(
        WORKLOAD_WEBHOOK,
        "/validate",
        workload_rules(policy),
        (("gpu-relevant-template", workload_relevance_condition(policy)),),
    )
    # What an autoscaler scales is only known from the cluster: no condition.
    autoscaler_hook = hook(AUTOSCALER_WEBHOOK, "/validate", autoscaler_rules())
    autoscaler_hook["failurePolicy"] = AUTOSCALER_FAILURE_POLICY
    claim_hook = hook(
        CLAIM_WEBHOOK,
        "/validate",
        claim_rules(),
        (("gpu-claim", claim_relevance_condition(policy)),),
    )
    binding_hook = hook(BINDING_WEBHOOK, "/validate", [_pod_rule(["CREATE"], "pods/binding")])
    env_keys_hook = hook(
        ENV_KEYS_WEBHOOK,
        "/validate",
        env_key_rules(),
        (("device-request-key", env_key_condition(policy)),),
    )
    metadata = {"name": name, "labels": dict(APP_LABELS)}
    return (
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": metadata,
            "webhooks": mutating_hooks,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": dict(metadata),
            "webhooks": [
                pods_hook,
                pod_updates_hook,
                unclassed_pods_hook,
                workload_hook,
                autoscaler_hook,
                claim_hook,
                binding_hook,
                env_keys_hook,
                policy_webhook(endpoint, own_namespace or NAMESPACE, timeout_seconds),
            ],
        },
    )
