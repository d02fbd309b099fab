"""The webhook of ResourceClaimTemplates and ResourceClaims: refused at their CREATE (their
specs are immutable) when no node of the policy's pools could ever satisfy them
(``webhook.engine.dra.claim_objects``). Its condition sends only those asking for one of the
policy's GPU or MIG DeviceClasses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.engine.decision import Decision
from webhook.engine.dra.api import CLAIM_TEMPLATES, CLAIMS, GROUP, VERSION
from webhook.engine.dra.claim_objects import judge_claim_object
from webhook.engine.handlers.cel import claim_relevance_condition
from webhook.engine.handlers.declaration import Condition, Handler, ResourceRule, Review, static
from webhook.engine.handlers.twins import claim_relevant

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["VALIDATE_CLAIMS"]


def validate_claim_object(engine: Engine, review: Review) -> Decision:
    return judge_claim_object(engine.policy, review.request, engine.capacity(review.inventory))


VALIDATE_CLAIMS = Handler(
    "validate-claims",
    mutating=False,
    rules=static(
        ResourceRule(
            GROUP,
            (VERSION,),
            (CLAIM_TEMPLATES, CLAIMS),
            {"CREATE": validate_claim_object},
        )
    ),
    summary="Refuses a ResourceClaimTemplate or ResourceClaim of GPUs no node could satisfy.",
    conditions=(Condition("gpu-claim", claim_relevance_condition, claim_relevant),),
)
