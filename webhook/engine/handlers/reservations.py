"""The webhook of claims' reservations: kube-scheduler's status update that allocates a
ResourceClaim and reserves it for the pod it is about to bind (``resourceclaims/status``),
the pod read and judged again against its claims as they are then.

Until kube-scheduler reserves a claim for a pod, the claim can be deleted and created
again under its name asking for something else (``webhook.engine.binding`` says how),
so the claims a pod was admitted with are not the ones it runs with. The scheduler
writes the allocation and the reservation in one status update, and binds the pod only
once every claim of the pod is reserved for it; a claim reserved is no longer removed,
and one made again is a new claim, allocated and reserved anew. So judging each
reservation holds what judging the binding held, and an outage of the service stops only
the pods that use claims: a pod without claims reserves none, and is bound whatever the
service's state. (The binding's webhook, which every pod of an opted-in namespace
needed, is retired: ``bindings.VALIDATE_BINDINGS``.)

Each reservation reads the pods newly reserved afresh, and the claims they name; the
claim under review is judged as the update makes it. The rules that read claims judge
each pod (``binding.CLAIM_RULES``); one whose other claims are not allocated yet is
judged by what they ask, and again when they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.engine.binding import BOUND_POD, CLAIM_RULES, claims_refusal, pod_as_bound
from webhook.engine.decision import (
    Decision,
    Unjudged,
    Violation,
    allow,
    malformed,
    subject,
)
from webhook.engine.dra.api import CLAIM, CLAIMS, GROUP, VERSION
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import MAX_SOURCES, ClaimObjects, sources_named
from webhook.engine.handlers.cel import pod_reservation_condition
from webhook.engine.handlers.declaration import Condition, Handler, ResourceRule, Review, static
from webhook.engine.handlers.twins import newly_reserved_pods, reserves_a_pod
from webhook.engine.pod import read_pod
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules.claims import RULE as CLAIMS_RULE
from webhook.errors import MalformedObject

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["VALIDATE_RESERVATIONS"]

MAX_PODS = 4
"""The most pods one reservation is judged for: kube-scheduler reserves a claim for one
pod at a time."""


def _reserved(request: AdmissionRequest) -> list[tuple[str, str]]:
    try:
        found = newly_reserved_pods(request)
    except (AttributeError, TypeError):
        return []  # kube-apiserver validates a claim's status before this webhook sees it
    return [(n, u) for n, u in found if isinstance(n, str) and n][:MAX_PODS]


def reservation_sources(
    engine: Engine, request: AdmissionRequest, read: ClaimObjects
) -> tuple[ClaimSource, ...]:
    """The pods newly reserved first; then, asked again with them read, the claims they
    name."""
    pods = [ClaimSource(BOUND_POD, name) for name, _ in _reserved(request)]
    named = [pod_as_bound(p) for s in pods if isinstance(p := read.found.get(s), dict)]
    return tuple(dict.fromkeys((*pods, *sources_named(named))))[:MAX_SOURCES]


def validate_reservation(engine: Engine, review: Review) -> Decision:
    """Each pod newly reserved judged again by the rules its claims decide, this claim as
    the update makes it. A pod that could not be read refuses the reservation (the webhook
    fails closed); one that is gone, or another pod under its name, is not judged."""
    request = review.request
    claim = _claim_name(request)
    claims = _with_claim(review.claims, claim, request.object)
    now = engine.capacity(review.inventory)
    violations: list[Violation] = []
    named: list[str] = []
    for name, uid in _reserved(request):
        source = ClaimSource(BOUND_POD, name)
        if source in claims.unreadable:
            reason = f"pod {name!r} could not be read ({claims.unreadable[source]})"
            violations.append(Unjudged(CLAIMS_RULE, reason))
            named.append(name)
            continue
        obj = claims.found.get(source)
        if not isinstance(obj, dict) or (obj.get("metadata") or {}).get("uid") != uid:
            continue
        try:
            pod = read_pod(pod_as_bound(obj), engine.policy)
        except MalformedObject as error:
            return malformed(str(error))
        if engine.policy.exemption_for(request.namespace, pod.labels) is not None:
            continue
        found = [v for v in engine.pod_violations(pod, now, claims) if v.rule in CLAIM_RULES]
        violations += found
        named += [name] if found else []
    if not violations:
        return allow()
    return _refused(request, claim, named, violations)


def _refused(
    request: AdmissionRequest, claim: str, pods: list[str], violations: list[Violation]
) -> Decision:
    refused = (
        f"{subject('reservation of claim', request.namespace, claim)} for pod "
        f"{', '.join(repr(p) for p in dict.fromkeys(pods))}, judged by its claims as the "
        "scheduler allocated them"
    )
    return claims_refusal(refused, violations)


def _claim_name(request: AdmissionRequest) -> str:
    metadata = request.object.get("metadata") if isinstance(request.object, dict) else None
    name = request.name or (metadata.get("name") if isinstance(metadata, dict) else "")
    return name if isinstance(name, str) else ""


def _with_claim(read: ClaimObjects, name: str, claim: object) -> ClaimObjects:
    """`read` with the claim under review as the update makes it."""
    if not name or not isinstance(claim, dict):
        return read
    source = ClaimSource(CLAIM, name)
    unreadable = {s: r for s, r in read.unreadable.items() if s != source}
    return ClaimObjects(
        {**read.found, source: claim}, read.missing - {source}, unreadable, read.looked_up
    )


VALIDATE_RESERVATIONS = Handler(
    "validate-reservations",
    mutating=False,
    rules=static(
        ResourceRule(
            GROUP,
            (VERSION,),
            (f"{CLAIMS}/status",),
            {"UPDATE": validate_reservation},
            reads=reservation_sources,
            reads_afresh=True,
        )
    ),
    summary="Judges a pod again when kube-scheduler reserves a claim for it, against its "
    "claims as the scheduler allocated them.",
    conditions=(Condition("reserves-a-pod", pod_reservation_condition, reserves_a_pod),),
)
