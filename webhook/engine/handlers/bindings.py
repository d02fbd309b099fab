"""The retired webhook of pods' bindings (``pods/binding``, kube-scheduler's last write
before a kubelet runs the pod): the pod read and judged again against its ResourceClaims
as the scheduler allocated them (``webhook.engine.binding``), since a claim can be
deleted and made again under its name until then.

A Binding carries no labels nor anything of the pod, so every binding of an opted-in
namespace was sent, and, failing closed, a stopped service held the scheduling of every
pod of those namespaces, claims or none. The reservations' webhook
(``reservations.VALIDATE_RESERVATIONS``) holds the same line where only pods with claims
meet it; this one is no longer installed, and still answers the configurations of a
release before until they are replaced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.engine.binding import (
    BINDING,
    CLAIM_RULES,
    binding_sources,
    bound_pod,
    claims_refusal,
    pod_as_bound,
)
from webhook.engine.decision import (
    Decision,
    Unjudged,
    allow,
    exempt,
    judge,
    malformed,
    shorten,
    subject,
)
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.engine.handlers.declaration import Handler, ResourceRule, Review, static
from webhook.engine.handlers.pods import pod_namespace
from webhook.engine.pod import read_pod
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules.claims import RULE as CLAIMS_RULE
from webhook.errors import MalformedObject

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["VALIDATE_BINDINGS"]


def binding_claim_sources(
    engine: Engine, request: AdmissionRequest, read: ClaimObjects
) -> tuple[ClaimSource, ...]:
    """The pod bound first; then, asked again with it read, the claims it names."""
    return binding_sources(request, read)


def validate_binding(engine: Engine, review: Review) -> Decision:
    """The pod bound judged again by the rules its claims decide. A pod that could not be
    read is refused (the webhook fails closed); one that is gone, or was not looked for
    (no cluster to read it from), is the binding's own business."""
    request, claims = review.request, review.claims
    found = bound_pod(request, claims)
    if found is None:
        return allow()
    source, obj = found
    named = subject("binding of pod", request.namespace, source.name)
    refused = f"{named}{_bound_to(request)}, judged by its claims as the scheduler allocated them"
    if source in claims.unreadable:
        reason = f"the pod could not be read ({claims.unreadable[source]})"
        return judge([Unjudged(CLAIMS_RULE, reason)], refused)
    if not isinstance(obj, dict):
        return allow()
    now = engine.capacity(review.inventory)
    try:
        pod = read_pod(pod_as_bound(obj), engine.policy)
        if not pod.resource_claims:
            return allow()
        exemption = engine.policy.exemption_for(pod_namespace(request, pod), pod.labels)
        if exemption is not None:
            return exempt(exemption.reason)
        violations = [v for v in engine.pod_violations(pod, now, claims) if v.rule in CLAIM_RULES]
    except MalformedObject as error:
        return malformed(str(error))
    return claims_refusal(refused, violations)


def _bound_to(request: AdmissionRequest) -> str:
    """` to node 'gpu-3'`, from the Binding's target; empty when it names none."""
    target = request.object.get("target") if isinstance(request.object, dict) else None
    node = target.get("name") if isinstance(target, dict) else None
    return f" to node {shorten(node, 80)!r}" if isinstance(node, str) and node else ""


VALIDATE_BINDINGS = Handler(
    "validate-bindings",
    mutating=False,
    rules=static(
        ResourceRule(
            "",
            ("v1",),
            (f"pods/{BINDING}",),
            {"CREATE": validate_binding},
            reads=binding_claim_sources,
            reads_afresh=True,
        )
    ),
    summary="Judged a pod again at its binding, against its claims as the scheduler "
    "allocated them (retired for validate-reservations).",
    retired=True,
)
