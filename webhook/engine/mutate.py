"""Mutation of a workload pod at CREATE: what the practice has every team write by hand.

Steps run in a fixed order and each adds only what is missing, so a second
call on the mutated pod yields no patch (kube-apiserver re-invokes webhooks
with reinvocationPolicy IfNeeded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook.engine.capacity.now import STATIC, CapacityNow
from webhook.engine.dra.pod_claims import NO_CLAIMS, NONE, ClaimObjects, PodClaims, pod_claims
from webhook.engine.gpu_shares import shares_asked
from webhook.engine.mutation_summary import injected, joined
from webhook.engine.patch import PatchBuilder, apply_patch
from webhook.engine.placement import tolerated
from webhook.engine.pod import Container, PodView, read_pod
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy, WorkloadClass

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def mutate_pod(
    policy: Policy,
    pod: PodView,
    workload: WorkloadClass,
    now: CapacityNow = STATIC,
    claims: PodClaims = NONE,
    *,
    template: bool = False,
) -> list[dict[str, Any]]:
    """The patch; `now` gives PriorityClasses' real values when the cluster is known.
    A pod `template` gets the PriorityClass by name only: kube-apiserver's Priority
    plugin gives each of its pods the class's value as it is when the pod is created,
    while a value written into the template would outlive a change of the class and
    have every later pod refused.

    A pod that claims GPUs through Dynamic Resource Allocation (or has a claim not known,
    which may) gets no device-plugin GPU, affinity to the class's pools that take
    claimed GPUs, and keeps the node's GPUs visible to the containers using its claims.
    The claims are read through `now`'s view of GPU DeviceClasses, validation's."""
    claims = claims.seen_with(policy, pod, now.dra.classes_for(policy))
    patch = PatchBuilder()
    defaulted = _gpu_counts(patch, policy, pod, workload, claims)
    _node_affinity(patch, policy, pod, workload, claims)
    _tolerations(patch, pod, workload)
    _priority(patch, pod, workload, now, value=not template)
    _co_location(patch, pod, workload)
    _isolation(patch, policy, pod, defaulted, claims)
    if patch.operations:
        _record(patch, policy, pod)
    return patch.operations


INJECTED_ANNOTATION = "gpu-admission.io/injected"
"""What the mutation injected into a pod or template (``mutation_summary.injected``),
comma-separated, so that a reader of the stored object tells the user's fields from ours."""
REVISION_ANNOTATION = "gpu-admission.io/policy-revision"
"""The revision of the policy that mutated it (``Policy.revision``)."""


def _record(patch: PatchBuilder, policy: Policy, pod: PodView) -> None:
    """The annotations naming what `patch` injected and the policy's revision. A pod made
    from a template this policy mutated carries the template's, and gets no patch of its
    own but the co-location hint of its Job's label: its names are added to the
    template's. Names recorded under another revision, or none, are not repeated."""
    recorded = _recorded(pod.raw, policy.revision)
    names = ",".join(joined(recorded, injected(patch.operations)))
    metadata, path = patch.mapping(pod.raw, "", "metadata")
    annotations, path = patch.mapping(metadata, path, "annotations")
    patch.set(annotations, path, INJECTED_ANNOTATION, names)
    if policy.revision:
        patch.set(annotations, path, REVISION_ANNOTATION, policy.revision)


def _recorded(raw: Mapping[str, Any], revision: str) -> object:
    """What a mutation by the policy of `revision` recorded on `raw`, else None."""
    metadata = raw.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not revision or not isinstance(annotations, Mapping):
        return None
    if annotations.get(REVISION_ANNOTATION) != revision:
        return None
    return annotations.get(INJECTED_ANNOTATION)


def created_pod(
    policy: Policy,
    obj: dict[str, Any],
    now: CapacityNow = STATIC,
    objects: ClaimObjects = NO_CLAIMS,
) -> PodView:
    """The pod `obj` becomes at its CREATE: with our mutation applied, when its class has one.
    Raises MalformedObject for a pod that cannot be read."""
    pod = read_pod(obj, policy)
    patch = class_patch(policy, pod, now, objects)
    return read_pod(apply_patch(obj, patch), policy) if patch else pod


def class_patch(
    policy: Policy,
    pod: PodView,
    now: CapacityNow = STATIC,
    objects: ClaimObjects = NO_CLAIMS,
    *,
    template: bool = False,
) -> list[dict[str, Any]]:
    """The patch of a pod (or a pod `template`) at its CREATE, by its class; none for a
    pod of no class, or of a class without mutation."""
    workload = policy.classes.get(pod.labels.get(policy.workload_label, ""))
    if workload is None or not workload.mutate:
        return []
    claims = pod_claims(policy, pod, objects, now.dra.classes_for(policy))
    return mutate_pod(policy, pod, workload, now, claims, template=template)


def _gpu_counts(
    patch: PatchBuilder, policy: Policy, pod: PodView, workload: WorkloadClass, claims: PodClaims
) -> Container | None:
    """Default the GPU count, and make requests equal limits where only one is set."""
    containers = pod.runnable_containers()
    if not any(c.gpu for c in containers):
        if workload.default_gpus == 0 or not pod.containers or claims.may_ask_gpus:
            return None
        if shares_asked(pod.raw):
            return None  # a share of a GPU (a KAI fraction): a whole one would defeat it
        if not any(pool.takes_device_plugin_gpus for pool in policy.pools_of(workload)):
            return None  # its pools give GPUs through DRA only: the pod must claim them
        first = pod.containers[0]
        count = str(workload.default_gpus)
        resources, path = patch.mapping(first.raw, first.path, "resources")
        for kind in ("limits", "requests"):
            quantities, kind_path = patch.mapping(resources, path, kind)
            patch.set(quantities, kind_path, policy.gpu_resource, count)
        return first
    for container in containers:
        for quantity in container.gpu:
            if quantity.request is None or quantity.limit is None:
                missing = "requests" if quantity.request is None else "limits"
                value = quantity.limit if quantity.request is None else quantity.request
                resources, path = patch.mapping(container.raw, container.path, "resources")
                quantities, kind_path = patch.mapping(resources, path, missing)
                patch.set(quantities, kind_path, quantity.resource, value)
    return None


def _node_affinity(
    patch: PatchBuilder, policy: Policy, pod: PodView, workload: WorkloadClass, claims: PodClaims
) -> None:
    constraints = [_expression(policy.pool_label, _pool_values(policy, pod, workload, claims))]
    model = workload.pinned_model(pod.labels.get(policy.gpu_model_label))
    if model:
        constraints.append(_expression(policy.model_label, (model,)))
    affinity, affinity_path = patch.mapping(pod.spec, "/spec", "affinity")
    node_affinity, node_path = patch.mapping(affinity, affinity_path, "nodeAffinity")
    terms = list(pod.required_terms or ())
    if not terms:
        required, required_path = patch.mapping(node_affinity, node_path, REQUIRED)
        term_list, terms_path = patch.sequence(required, required_path, "nodeSelectorTerms")
        patch.append(term_list, terms_path, {"matchExpressions": constraints})
    else:
        terms_path = f"{node_path}/{REQUIRED}/nodeSelectorTerms"
        for index, term in enumerate(terms):
            if not term.get("matchExpressions") and not term.get("matchFields"):
                continue  # an empty term matches no node; ANDing into it would widen it
            present = [_canonical(e) for e in term.get("matchExpressions") or ()]
            for constraint in constraints:
                if _canonical(constraint) not in present:
                    expressions, path = patch.sequence(
                        term, f"{terms_path}/{index}", "matchExpressions"
                    )
                    patch.append(expressions, path, constraint)
    if workload.preferred_pools:
        preferred = _list_at(node_affinity, PREFERRED, f"{node_path}/{PREFERRED}")
        present_preferences = [_canonical_preference(p) for p in preferred]
        for label_value, weight in workload.preferred_pools:
            preference = {
                "weight": weight,
                "preference": {
                    "matchExpressions": [_expression(policy.pool_label, (label_value,))]
                },
            }
            if _canonical_preference(preference) not in present_preferences:
                items, path = patch.sequence(node_affinity, node_path, PREFERRED)
                patch.append(items, path, preference)


def _pool_values(
    policy: Policy, pod: PodView, workload: WorkloadClass, claims: PodClaims
) -> tuple[str, ...]:
    """The pool label values of the class's pools that give GPUs the way the pod takes
    them: through DRA for a pod with GPU claims, else through the device plugin. All of
    the class's pools when none does (validation says why)."""
    if claims.may_ask_gpus:
        fitting = [p.label_value for p in policy.pools_of(workload) if p.takes_dra_gpus]
    else:
        fitting = [p.label_value for p in policy.pools_of(workload) if p.takes_device_plugin_gpus]
    return tuple(fitting) if fitting else workload.pool_label_values


def _tolerations(patch: PatchBuilder, pod: PodView, workload: WorkloadClass) -> None:
    for taint in workload.taints:
        if tolerated(pod.tolerations, taint):
            continue
        toleration: dict[str, Any] = (
            {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
            if taint.value
            else {"key": taint.key, "operator": "Exists", "effect": taint.effect}
        )
        items, path = patch.sequence(pod.spec, "/spec", "tolerations")
        patch.append(items, path, toleration)


def _priority(
    patch: PatchBuilder, pod: PodView, workload: WorkloadClass, now: CapacityNow, *, value: bool
) -> None:
    """kube-apiserver's Priority plugin resolves the class again after a webhook changed
    the pod and refuses a value that is not the class's, so the value set is the
    cluster's when known, else the policy's. A class the cluster is known not to have
    is left out: the plugin would refuse it with no hint, the priority rule explains."""
    if pod.priority_class_name is not None:
        return  # its own class is right already; another class is for validation to refuse
    wanted = workload.priority_class
    live = now.priority_classes.get(wanted.name) if now.priority_classes is not None else None
    if now.priority_classes is not None and live is None:
        return  # kube-apiserver would refuse the name unexplained; validation says why
    number, preemption = (
        (live.value, live.preemption_policy)
        if live is not None
        else (wanted.value, wanted.preemption_policy)
    )
    patch.set(pod.spec, "/spec", "priorityClassName", wanted.name)
    if not value:
        return
    patch.set(pod.spec, "/spec", "priority", number)
    if preemption is not None:
        patch.set(pod.spec, "/spec", "preemptionPolicy", preemption)


def _co_location(patch: PatchBuilder, pod: PodView, workload: WorkloadClass) -> None:
    co_location = workload.co_location
    if co_location is None:
        return
    job_label = next((key for key in co_location.job_labels if pod.labels.get(key)), None)
    if job_label is None:
        return
    term = {
        "weight": co_location.weight,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {job_label: pod.labels[job_label]}},
            "topologyKey": co_location.topology_key,
        },
    }
    affinity = _mapping_at(pod.spec, "affinity", "/spec/affinity")
    pod_affinity = _mapping_at(affinity, "podAffinity", "/spec/affinity/podAffinity")
    existing = _list_at(pod_affinity, PREFERRED, f"/spec/affinity/podAffinity/{PREFERRED}")
    if term in existing:
        return
    affinity, affinity_path = patch.mapping(pod.spec, "/spec", "affinity")
    pod_affinity, pod_path = patch.mapping(affinity, affinity_path, "podAffinity")
    items, path = patch.sequence(pod_affinity, pod_path, PREFERRED)
    patch.append(items, path, term)


def _isolation(
    patch: PatchBuilder,
    policy: Policy,
    pod: PodView,
    defaulted: Container | None,
    claims: PodClaims,
) -> None:
    """Containers without GPUs must not see the node's GPUs through the image's own env."""
    _isolate(
        patch,
        policy,
        (
            c
            for c in pod.runnable_containers()
            if c is not defaulted and not c.requests_gpu() and not claims.may_give_gpus(c)
        ),
    )


def isolate_ephemeral_containers(
    policy: Policy, pod: PodView, old_pod: Any
) -> list[dict[str, Any]]:
    """The patch that hides the node's GPUs from debug containers being added (`kubectl
    debug`): they can have no resources, so no GPU of theirs, yet a CUDA image would see
    every GPU of the node, other tenants' included. Those already there are left alone:
    kube-apiserver refuses any change to an existing ephemeral container."""
    existing = {
        name
        for c in _old_ephemeral_containers(old_pod)
        if isinstance(c, dict) and isinstance(name := c.get("name"), str)
    }
    patch = PatchBuilder()
    _isolate(patch, policy, (c for c in pod.ephemeral_containers if c.name not in existing))
    return patch.operations


def _old_ephemeral_containers(old_pod: Any) -> list[Any]:
    spec = old_pod.get("spec") if isinstance(old_pod, dict) else None
    containers = spec.get("ephemeralContainers") if isinstance(spec, dict) else None
    return containers if isinstance(containers, list) else []


def _isolate(patch: PatchBuilder, policy: Policy, containers: Iterable[Container]) -> None:
    for container in containers:
        if any(e.get("name") == policy.visible_devices_env for e in container.env):
            continue
        env, path = patch.sequence(container.raw, container.path, "env")
        patch.append(env, path, {"name": policy.visible_devices_env, "value": "void"})


def _expression(key: str, values: tuple[str, ...]) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _canonical(expression: Mapping[str, Any]) -> tuple[Any, ...]:
    """An expression compared regardless of the order of its values (of any type)."""
    values = expression.get("values") or ()
    if not isinstance(values, list | tuple):
        values = (values,)
    return (
        expression.get("key"),
        expression.get("operator"),
        tuple(sorted(repr(v) for v in values)),
    )


def _canonical_preference(term: Any) -> tuple[Any, ...]:
    if not isinstance(term, dict):
        return ()
    preference = term.get("preference")
    expressions = preference.get("matchExpressions") if isinstance(preference, dict) else None
    if not isinstance(expressions, list):
        return (term.get("weight"),)
    return (
        term.get("weight"),
        tuple(_canonical(e) for e in expressions if isinstance(e, dict)),
    )


def _mapping_at(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MalformedObject(path.lstrip("/").replace("/", "."), "must be a mapping")
    return value


def _list_at(parent: Mapping[str, Any], key: str, path: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedObject(path.lstrip("/").replace("/", "."), "must be a list")
    return value
