"""The webhook of autoscalers (HorizontalPodAutoscaler, KEDA ScaledObject): it only ever
warns, when one can scale its target beyond what the target's pools have now
(``webhook.engine.autoscalers``).

What an autoscaler scales is only known from the cluster, so every autoscaler of an
opted-in namespace is sent (no condition), and, never denying, the webhook fails open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhook.engine.autoscalers import autoscaler_warnings, scale_target
from webhook.engine.decision import Decision, allow
from webhook.engine.handlers.declaration import IGNORE, Handler, ResourceRule, Review, static

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["AUTOSCALER_RULES", "WARN_AUTOSCALERS"]

AUTOSCALER_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("autoscaling", ("v1", "v2"), "horizontalpodautoscalers"),
    ("keda.sh", ("v1alpha1",), "scaledobjects"),
)
"""(API group, versions, resource) of each autoscaler kind the webhook warns of."""


def warn_of_autoscaler(engine: Engine, review: Review) -> Decision:
    """Admitted, with a warning when it can scale ``review.scaled`` (its target as the
    cluster has it) beyond what its pools have now."""
    target = review.target if review.target is not None else scale_target(review.request)
    if target is None:
        return allow()
    now = engine.capacity(review.inventory)
    warnings = autoscaler_warnings(engine.policy, target, review.scaled, now, engine.kinds)
    return Decision(allowed=True, warnings=tuple(warnings))


_JUDGES = {"CREATE": warn_of_autoscaler, "UPDATE": warn_of_autoscaler}

WARN_AUTOSCALERS = Handler(
    "warn-autoscalers",
    mutating=False,
    rules=static(
        *(ResourceRule(g, versions, (r,), _JUDGES) for g, versions, r in AUTOSCALER_RULES)
    ),
    summary="Warns of an autoscaler that can scale GPU pods beyond what their pools have.",
    failure_policy=IGNORE,
    reads_scale_target=True,
)
