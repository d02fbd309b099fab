"""A pod about to be bound to its node, judged against its claims as they are then.

A pod is judged at its CREATE against the ResourceClaims it names as they are then.
Until kube-scheduler allocates a claim and reserves it for the pod, the claim can be
deleted and created again under its name asking for something else (a claim's spec
never changes, and one reserved for a pod is no longer removed): a class pod admitted
with a shared claim of one GPU would run at its class's priority on a GPU node holding
none, or only other devices. It takes delete rights on claims, or create rights alone
with an owner that garbage collection removes. The claims made from a pod's templates
are no safer: their names are in the pod's status, and until allocation one can be
deleted and another made under its name, owned by the pod.

So the scheduler's binding (``pods/binding``, its last write before a kubelet runs the
pod) is judged too. The pod is read from the cluster, and each claim it names as the
scheduler will use it: a shared claim by its name, a template's claim by the name the
pod's status records (the template itself while none is recorded). Then the rules that
read claims judge it again (``CLAIM_RULES``); only them, since nothing else about the
pod can have changed since its CREATE without an update judged as it came, and the
scheduler has just found the node it fits.

A binding review carries only the pod's name, so the objects it needs come in two rounds
(``binding_sources``): the pod, then its claims. ``BOUND_POD`` names the pod among them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.decision import ENFORCE, Decision, Violation, judge, reasons
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import MAX_SOURCES, ClaimObjects, sources_named
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules import capacity, claims

__all__ = [
    "BINDING",
    "BOUND_POD",
    "CLAIM_RULES",
    "binding_sources",
    "bound_pod",
    "claims_refusal",
    "is_pod_binding",
    "pod_as_bound",
]

BINDING = "binding"
"""The subresource kube-scheduler creates to bind a pod to its node."""

BOUND_POD = "Pod"
"""The kind of the source that names the pod under a binding review."""

CLAIM_RULES = frozenset({capacity.COUNT, capacity.MIG, claims.RULE})
"""The rules whose outcome the pod's claims decide: how many GPUs and which MIG profiles
it gets, and whether its claims are known and give GPUs at all."""


def claims_refusal(refused: str, violations: list[Violation]) -> Decision:
    """The refusal, whose first words are `refused`, of a pod judged again by its claims
    as the scheduler allocated them; what to do says that the pod keeps its claims."""
    enforced = [v.message for v in violations if v.mode == ENFORCE]
    message = (
        f"{refused}: {reasons(enforced)}; a pod keeps the claims it names, so give them "
        "back what they asked at its CREATE or create the pod again"
    )
    return judge(violations, refused, message)


def is_pod_binding(request: AdmissionRequest) -> bool:
    """Whether `request` is the binding of a pod to a node (kube-scheduler's): a CREATE of
    the ``pods/binding`` subresource, whose object is a ``Binding``."""
    return (
        request.group == ""
        and request.resource == "pods"
        and request.subresource == BINDING
        and request.operation == "CREATE"
    )


def _pod_source(request: AdmissionRequest) -> ClaimSource | None:
    name: Any = request.name
    if not name and isinstance(request.object, dict):
        metadata = request.object.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
    return ClaimSource(BOUND_POD, name) if isinstance(name, str) and name else None


def binding_sources(request: AdmissionRequest, read: ClaimObjects) -> tuple[ClaimSource, ...]:
    """What the binding `request` needs read: the pod, and once it is among `read` the
    claims it will use."""
    source = _pod_source(request)
    if source is None:
        return ()
    pod = read.found.get(source)
    if not isinstance(pod, dict):
        return (source,)
    return (source, *sources_named([pod_as_bound(pod)])[:MAX_SOURCES])


def bound_pod(request: AdmissionRequest, read: ClaimObjects) -> tuple[ClaimSource, Any] | None:
    """The pod under the binding `request` as read (its source and object, None for the
    object when it was not found or not read), or None for a binding that names none."""
    source = _pod_source(request)
    return None if source is None else (source, read.found.get(source))


def pod_as_bound(pod: Mapping[str, Any]) -> dict[str, Any]:
    """`pod` naming, for each claim made from a template, the claim its status says was
    made (``status.resourceClaimStatuses``), as a shared claim: the one the scheduler
    allocates and the kubelet prepares."""
    made = _claims_made(pod.get("status"))
    spec = pod.get("spec")
    entries = spec.get("resourceClaims") if isinstance(spec, dict) else None
    if not made or not isinstance(entries, list) or not isinstance(spec, dict):
        return dict(pod)
    named = [
        {"name": entry["name"], "resourceClaimName": made[entry["name"]]}
        if isinstance(entry, dict)
        and entry.get("resourceClaimTemplateName")
        and entry.get("name") in made
        else entry
        for entry in entries
    ]
    return {**pod, "spec": {**spec, "resourceClaims": named}}


def _claims_made(status: Any) -> dict[str, str]:
    entries = status.get("resourceClaimStatuses") if isinstance(status, dict) else None
    made: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict):
            continue
        name, claim = entry.get("name"), entry.get("resourceClaimName")
        if isinstance(name, str) and isinstance(claim, str) and claim:
            made[name] = claim
    return made
