"""ResourceClaimTemplates and ResourceClaims judged as they are created.

A template (or a claim) that asks for more GPUs than any node of the policy's pools
that take claimed GPUs holds, a MIG profile none of them offers, or a GPU product none
of them has, could never be allocated: every pod using it would stay Pending. It is
refused when created, in the namespaces the webhook serves, with what would be
accepted. It names no workload class, so it is judged against every such pool; the
pods using it are judged against their own class's pools when they are created.
"""

from __future__ import annotations

from webhook.engine.capacity.now import CapacityNow
from webhook.engine.decision import Decision, allow, judge, malformed, subject
from webhook.engine.dra.api import CLAIM, GROUP, TEMPLATE
from webhook.engine.dra.claims import ClaimSource, claim_asks
from webhook.engine.dra.pod_claims import PodClaim, PodClaims
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules.claims import claim_violations
from webhook.engine.rules.registry import with_modes
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

KINDS = (TEMPLATE, CLAIM)


def claim_object_kind(request: AdmissionRequest) -> str | None:
    """``ResourceClaimTemplate`` or ``ResourceClaim`` for the CREATE of one; else None."""
    if request.group != GROUP or request.kind not in KINDS:
        return None
    if request.operation != "CREATE" or request.subresource:
        return None
    return request.kind


def judge_claim_object(policy: Policy, request: AdmissionRequest, now: CapacityNow) -> Decision:
    """Refuse a template or claim no node of the policy's pools could ever satisfy."""
    kind = claim_object_kind(request)
    if kind is None:
        return allow()
    source = ClaimSource(kind, request.name or _name(request.object))
    try:
        asks = claim_asks(now.dra.classes_for(policy), source, request.object)
    except MalformedObject as error:
        return malformed(str(error))
    if not asks.asks_gpus:
        return allow()
    claims = PodClaims((PodClaim(source.name, source, asks),))
    violations = with_modes(policy, None, claim_violations(policy, claims, now))
    return judge(list(violations), subject(kind, request.namespace, source.name))


def _name(obj: object) -> str:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""
