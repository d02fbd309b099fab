"""Placement answers worked out once per kind of pod, not once per pod.

What the placement rules find in a pod depends on nothing but its class, its GPU-model
label, its nodeSelector, required node affinity and tolerations, the policy, and the GPU
nodes the live inventory holds that the policy's kinds of node do not cover. The pods of
one workload carry the same of each (a Deployment's replicas, a Job's workers, every
pod whose placement our mutation wrote), so an engine keeps each answer by those fields
and judges the next pod like them by looking it up.

The fields are keyed by their JSON text (orjson, in the pod's own order: the messages
follow that order, so two pods whose fields differ only in order are two keys). A
tenant who sends a new placement with every pod only fills the table: it holds at most
``MAX_ANSWERS`` answers, each of fields of at most ``MAX_KEY_BYTES``, and starts over
when full; fields larger than that are judged each time. A change of the uncovered GPU
nodes (an inventory change) starts the table over too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import orjson

from webhook.engine.decision import Violation
from webhook.engine.kept import KeptAnswers

if TYPE_CHECKING:
    from webhook.engine.rules.context import RuleContext

MAX_ANSWERS = 1024
MAX_KEY_BYTES = 4096

Check = Callable[["RuleContext"], list[Violation]]


class PlacementAnswers:
    """An engine's placement findings by the fields they depend on."""

    def __init__(self, max_answers: int = MAX_ANSWERS, max_key_bytes: int = MAX_KEY_BYTES) -> None:
        self.max_key_bytes = max_key_bytes
        self.kept: KeptAnswers[tuple[Violation, ...]] = KeptAnswers(max_answers)

    def find(self, check: Check, context: RuleContext) -> list[Violation]:
        """What `check` finds in the pod of `context`, from the table when a pod with the
        same fields was judged since the uncovered GPU nodes last changed."""
        pod, model_label = context.pod, context.policy.gpu_model_label
        try:
            fields = orjson.dumps(
                (
                    f"{check.__module__}.{check.__qualname__}",
                    context.label,
                    pod.labels.get(model_label),
                    pod.node_selector,
                    pod.required_terms,
                    pod.tolerations,
                )
            )
        except (TypeError, orjson.JSONEncodeError):  # beyond JSON: judged each time
            return check(context)
        if len(fields) > self.max_key_bytes:
            return check(context)
        uncovered = context.now.gpu_node_kinds
        return list(self.kept.get(fields, uncovered, lambda: tuple(check(context))))


class NoAnswers(PlacementAnswers):
    """Keeps nothing: every pod is judged afresh."""

    def find(self, check: Check, context: RuleContext) -> list[Violation]:
        return check(context)
