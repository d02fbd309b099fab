"""The matchConditions' Python twins: what each CEL of ``webhook.engine.handlers.cel``
says of a request, said in Python.

kube-apiserver evaluates the CEL and calls the service only when every condition of a
webhook holds (``Handler.sends`` asks the twins the same question). The two are tested
against each other with kube-apiserver's own CEL, and the judges are asked of every
request the conditions keep from them, which they must admit unchanged
(tests/differential/test_match_conditions.py): the judges stay whole, so a review
judged offline, or sent by configurations of before, is judged in full, and a condition
can never be what keeps a request from a rule.

A twin is told only well-formed objects apart as the CEL does; for an object the CEL
could not evaluate (which kube-apiserver refuses under ``failurePolicy: Fail`` without
calling the service) it says True, so that the judge sees it and says what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from webhook.engine.gpu_shares import FIXED_ANNOTATIONS, SHARE_ANNOTATIONS, VOLCANO_PREFIX
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules.device_access import is_cdi_annotation
from webhook.engine.templates import (
    CONTROLLER_KINDS,
    TemplateKind,
    mutated_template_kinds,
    pod_templates,
    template_kind,
)
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

__all__ = [
    "SCHEDULING_FIELDS",
    "claim_relevant",
    "classed_template",
    "env_key_held",
    "gpu_domains",
    "gpu_relevant",
    "gpu_relevant_pod",
    "judged_change",
    "newly_reserved_pods",
    "reserves_a_pod",
    "scheduling_changed",
    "workload_relevant",
]

SCHEDULING_FIELDS = ("tolerations", "nodeSelector", "affinity", "schedulingGates")
"""What of a pod's spec may change after its CREATE and changes where it can land:
tolerations may be added to any pod; a pod with scheduling gates may get its node
selector and affinity narrowed, and its gates removed."""

CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
RESOURCE_LISTS = CONTAINER_LISTS[:2]
"""Debug containers ask for no resources."""


def gpu_domains(policy: Policy) -> tuple[str, ...]:
    """``nvidia.com/`` and the domains of the policy's other GPU names, and Volcano's vGPU
    resources: a resource of one of them makes a pod the service's to judge, known to
    the policy or not yet."""
    names = (
        policy.gpu_resource,
        policy.mig_prefix,
        *sorted(policy.other_gpu_resources),
        *sorted(policy.dra_extended_resources),
    )
    return (*dict.fromkeys(name.split("/")[0] + "/" for name in names), VOLCANO_PREFIX)


def gpu_relevant(
    policy: Policy, pod: Any, *, labelled: bool = True, bound_counts: bool = True
) -> bool:
    """Twin of ``cel.gpu_relevance_condition``: whether the pod (or pod template) is one
    the policy can have an opinion on. `bound_counts`: whether a node named by hand
    makes it so (at a pod's CREATE, and always for a template)."""
    if not isinstance(pod, Mapping):
        return True
    if labelled and policy.workload_label in _labels(pod):
        return True
    if _asks_share(pod):
        return True
    spec = pod.get("spec")
    if spec is None:
        return False
    if not isinstance(spec, Mapping):
        return True  # a shape the CEL could not evaluate either
    try:
        return (
            _asks_gpu(gpu_domains(policy), spec)
            or _tolerates_gpu_taint(policy, spec)
            or _sets_device_env(policy, spec)
            or (bound_counts and bool(spec.get("nodeName")))
            or spec.get("priorityClassName") in policy.governed_priority_classes
            or bool(spec.get("resourceClaims"))
        )
    except (AttributeError, TypeError):
        return True  # a shape the CEL could not evaluate either


def gpu_relevant_pod(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of the pods' condition (``gpu_relevance_condition`` without the label, which
    the objectSelector has seen to)."""
    return gpu_relevant(
        policy, request.object, labelled=False, bound_counts=request.operation == "CREATE"
    )


def _asks_share(pod: Mapping[str, Any]) -> bool:
    metadata = pod.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return isinstance(annotations, Mapping) and any(k in annotations for k in SHARE_ANNOTATIONS)


def _asks_gpu(domains: tuple[str, ...], spec: Mapping[str, Any]) -> bool:
    for container in _containers(spec, RESOURCE_LISTS):
        resources = container.get("resources")
        if not isinstance(resources, Mapping):
            continue
        for side in ("limits", "requests"):
            names = resources.get(side) or {}
            if any(name.startswith(domains) for name in names):
                return True
    return False


def _tolerates_gpu_taint(policy: Policy, spec: Mapping[str, Any]) -> bool:
    keys = {taint.key for taint in policy.gpu_taints}
    return any(not t.get("key") or t["key"] in keys for t in spec.get("tolerations") or ())


def _sets_device_env(policy: Policy, spec: Mapping[str, Any]) -> bool:
    names = policy.requested_device_env
    for container in _containers(spec, CONTAINER_LISTS):
        if any(entry["name"] in names for entry in container.get("env") or ()):
            return True
        for source in container.get("envFrom") or ():
            prefix = source.get("prefix")
            if prefix and any(name.startswith(prefix) for name in names):
                return True
    return False


def _containers(spec: Mapping[str, Any], lists: Iterable[str]) -> Iterable[Mapping[str, Any]]:
    for name in lists:
        yield from spec.get(name) or ()


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def scheduling_changed(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.scheduling_change_condition``: anything but an update of a pod itself
    that leaves where it can land as it was."""
    if request.operation != "UPDATE" or request.subresource:
        return True
    new, old = _spec(request.object), _spec(request.old_object)
    if new is None or old is None:
        return True
    return any(
        (field in new) != (field in old) or new.get(field) != old.get(field)
        for field in SCHEDULING_FIELDS
    )


def judged_change(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.judged_change_condition``: what ``scheduling_changed`` says, or an
    update of a pod itself that changes a label it is judged by (``fixed_label_keys``) or
    an annotation of its GPU share, or adds or changes an annotation asking the runtime
    for CDI devices."""
    if scheduling_changed(policy, request):
        return True
    new, old = _metadata(request.object), _metadata(request.old_object)
    if new is None or old is None:
        return True
    labels, old_labels = _mapping(new.get("labels")), _mapping(old.get("labels"))
    for key in policy.fixed_label_keys:
        if (key in labels) != (key in old_labels) or labels.get(key) != old_labels.get(key):
            return True
    notes, old_notes = _mapping(new.get("annotations")), _mapping(old.get("annotations"))
    for key in FIXED_ANNOTATIONS:
        if (key in notes) != (key in old_notes) or notes.get(key) != old_notes.get(key):
            return True
    return any(
        isinstance(key, str) and is_cdi_annotation(key) and old_notes.get(key, _ABSENT) != value
        for key, value in notes.items()
    )


_ABSENT = object()


def _metadata(obj: Any) -> Mapping[str, Any] | None:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    return metadata if isinstance(metadata, Mapping) else None


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def _spec(obj: Any) -> Mapping[str, Any] | None:
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    return spec if isinstance(spec, Mapping) else None


def workload_relevant(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.workload_relevance_condition``: a workload of a kind with pod
    templates, one of which is a pod the policy can have an opinion on."""
    kinds = (*CONTROLLER_KINDS, *policy.workload_kinds)
    return _any_template(request, kinds, lambda template: gpu_relevant(policy, template))


def classed_template(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.classed_template_condition``: a workload of a kind whose templates
    are mutated, with a template that carries the workload label."""
    label = policy.workload_label
    return _any_template(
        request, mutated_template_kinds(policy), lambda template: label in _labels(template)
    )


def _any_template(
    request: AdmissionRequest,
    kinds: tuple[TemplateKind, ...],
    holds: Callable[[Mapping[str, Any]], bool],
) -> bool:
    """Whether the object is of one of `kinds` with a pod template `holds` for; True for
    one whose templates the CEL could not follow either."""
    obj = request.object
    if not isinstance(obj, Mapping):
        return True
    kind = template_kind(obj, kinds)
    if kind is None:
        return False
    try:
        templates = pod_templates(obj, kind)
    except MalformedObject:
        return True
    return any(holds(template) for _, template in templates)


def claim_relevant(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.claim_relevance_condition``: a template or claim with a request of
    one of the policy's GPU or MIG DeviceClasses."""
    spec = _spec(request.object)
    if spec is not None and request.resource == "resourceclaimtemplates":
        spec = _spec(spec)
    if spec is None:
        return False
    classes = policy.dra.device_classes
    try:
        for ask in (spec.get("devices") or {}).get("requests") or ():
            exactly = ask.get("exactly")
            if isinstance(exactly, Mapping) and exactly.get("deviceClassName") in classes:
                return True
            alternatives = ask.get("firstAvailable") or ()
            if any(sub.get("deviceClassName") in classes for sub in alternatives):
                return True
    except (AttributeError, TypeError):
        return True
    return False


def env_key_held(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.env_key_condition``: a ConfigMap or Secret with a key named as a
    variable the runtime reads as a device request."""
    obj = request.object
    if not isinstance(obj, Mapping):
        return True
    names = policy.requested_device_env
    for field in ("data", "binaryData", "stringData"):
        keys = obj.get(field)
        if isinstance(keys, Mapping) and any(key in names for key in keys):
            return True
    return False


def newly_reserved_pods(request: AdmissionRequest) -> list[tuple[str, str]]:
    """(name, uid) of each pod the claim under review is reserved for now and was not
    before, in order; raises TypeError or AttributeError for a shape the CEL could not
    read either."""
    before = {r.get("uid") for r in _reserved_for(request.old_object)}
    return [
        (r.get("name"), r.get("uid"))
        for r in _reserved_for(request.object)
        if r.get("resource") == "pods" and r.get("uid") not in before
    ]


def _reserved_for(obj: Any) -> list[Any]:
    status = obj.get("status") if isinstance(obj, Mapping) else None
    if status is None:
        return []
    reserved = status.get("reservedFor")
    return [] if reserved is None else list(reserved)


def reserves_a_pod(policy: Policy, request: AdmissionRequest) -> bool:
    """Twin of ``cel.pod_reservation_condition``: a status update reserving the claim for a
    pod it was not reserved for."""
    try:
        return bool(newly_reserved_pods(request))
    except (AttributeError, TypeError):
        return True
