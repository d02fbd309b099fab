"""The CEL of the webhooks' matchConditions, each made from the policy.

kube-apiserver evaluates them before calling the service, so they are what keeps a
stopped or slow service from the requests the policy has no opinion on: a pod without a
GPU marker, a ConfigMap without a device-request key, a claim of other devices. Each is
false (never an error, which would deny under ``failurePolicy: Fail``) for what it does
not look for. The real kube-apiserver compiles and evaluates them end to end
(tests/e2e/test_webhook_down.py, tests/e2e/test_bypasses.py, tests/e2e/test_workloads.py).
"""

from __future__ import annotations

from webhook.engine.gpu_shares import FIXED_ANNOTATIONS, SHARE_ANNOTATIONS
from webhook.engine.handlers.template_conditions import workload_condition
from webhook.engine.handlers.twins import SCHEDULING_FIELDS, gpu_domains
from webhook.engine.rules.device_access import CDI_KEY_PATTERN
from webhook.engine.templates import CONTROLLER_KINDS, mutated_template_kinds
from webhook.policy.compiled import Policy

__all__ = [
    "SCHEDULING_FIELDS",
    "claim_relevance_condition",
    "classed_template_condition",
    "env_key_condition",
    "gpu_relevance_condition",
    "judged_change_condition",
    "pod_reservation_condition",
    "scheduling_change_condition",
    "workload_relevance_condition",
]


def gpu_relevance_condition(policy: Policy, root: str = "object", *, labelled: bool = True) -> str:
    """CEL: true for a pod (or the pod template at `root`) the policy can have an opinion on.
    With `labelled` False the workload label is left out: the webhook's objectSelector
    has already sent labelled pods elsewhere."""
    spec = f"{root}.spec"
    container_lists = ("containers", "initContainers", "ephemeralContainers")
    # Every resource of a GPU domain (nvidia.com/, and those of the policy's other GPU
    # names), so a GPU resource the policy does not know yet still reaches it.
    domains = gpu_domains(policy)
    named_ours = f"exists(r, {' || '.join(f'r.startsWith({d!r})' for d in domains)})"
    resource_checks = " || ".join(
        f"(has({spec}.{lst}) && {spec}.{lst}.exists(c, has(c.resources) && "
        f"((has(c.resources.limits) && c.resources.limits.{named_ours}) || "
        f"(has(c.resources.requests) && c.resources.requests.{named_ours}))))"
        for lst in container_lists[:2]
    )
    # Every variable the runtime reads as a device request, set or spelled by an
    # envFrom prefix (NVIDIA_VISIBLE_ and a key DEVICES).
    env_names = "[" + ", ".join(f"'{name}'" for name in sorted(policy.requested_device_env)) + "]"
    env_checks = " || ".join(
        f"(has({spec}.{lst}) && {spec}.{lst}.exists(c, "
        f"(has(c.env) && c.env.exists(e, e.name in {env_names})) || "
        f"(has(c.envFrom) && c.envFrom.exists(f, has(f.prefix) && f.prefix != '' && "
        f"{env_names}.exists(n, n.startsWith(f.prefix))))))"
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
    label_check = _labelled(policy, root)
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
    # A GPU share asked by annotation (a KAI fraction) asks for no GPU resource.
    notes = f"{root}.metadata.annotations"
    shares = " || ".join(f"'{key}' in {notes}" for key in SHARE_ANNOTATIONS)
    share_check = f"(has({root}.metadata) && has({notes}) && ({shares}))"
    relevant = f"(has({spec}) && ({spec_checks})) || {share_check}"
    return f"{label_check} || {relevant}" if labelled else relevant


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


def judged_change_condition(policy: Policy) -> str:
    """CEL: what ``scheduling_change_condition`` says, or an update that changes a label
    the pod is judged by (its class, its GPU model, one an exemption matches: fixed at
    CREATE), or an annotation of its GPU share (``FIXED_ANNOTATIONS``), or adds or changes
    an annotation asking the runtime for CDI devices."""
    labels = " || ".join(_changed("labels", key) for key in policy.fixed_label_keys)
    shares = " || ".join(_changed("annotations", key) for key in FIXED_ANNOTATIONS)
    new, old = "object.metadata.annotations", "oldObject.metadata.annotations"
    devices = (
        f"(has({new}) && {new}.exists(k, k.matches(r'{CDI_KEY_PATTERN}') && "
        f"(!has({old}) || !(k in {old}) || {old}[k] != {new}[k])))"
    )
    return f"{scheduling_change_condition()} || {labels} || {shares} || {devices}"


def _changed(field: str, key: str) -> str:
    new, old = f"object.metadata.{field}", f"oldObject.metadata.{field}"
    has_new, has_old = f"(has({new}) && '{key}' in {new})", f"(has({old}) && '{key}' in {old})"
    return f"({has_new} != {has_old}) || ({has_new} && {new}['{key}'] != {old}['{key}'])"


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


def classed_template_condition(policy: Policy) -> str:
    """CEL: true for a workload of a kind whose templates are mutated, with a template
    that carries the workload label; workloads of no class never reach the service
    (``false`` when the policy mutates no kind)."""
    kinds = mutated_template_kinds(policy)
    return workload_condition(kinds, lambda t: _labelled(policy, t)) if kinds else "false"


def _labelled(policy: Policy, root: str) -> str:
    return (
        f"(has({root}.metadata) && has({root}.metadata.labels) && "
        f"'{policy.workload_label}' in {root}.metadata.labels)"
    )


def pod_reservation_condition(policy: Policy) -> str:
    """CEL: true for a claim's status update that reserves it for a pod it was not reserved
    for (kube-scheduler's, with the allocation, just before it binds the pod); every other
    status update (a driver's device status, a release) never reaches the service."""
    reserved = "has(object.status) && has(object.status.reservedFor)"
    before = (
        "has(oldObject.status) && has(oldObject.status.reservedFor) && "
        "oldObject.status.reservedFor.exists(o, o.uid == r.uid)"
    )
    return f"{reserved} && object.status.reservedFor.exists(r, r.resource == 'pods' && !({before}))"
