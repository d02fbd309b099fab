"""Where a pod could land: each kind of node of the policy (a pool and a GPU model), and why not.

Judged by the engine's own placement logic (webhook.engine.placement.reach_of)
on the pod as it will be scheduled, that is after our mutation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from webhook.engine.placement import Reach, reach_of
from webhook.engine.placement_exclusions import exclusions, not_matching
from webhook.engine.pod import PodView
from webhook.policy.compiled import Policy

Reachable = Literal["yes", "no", "unknown"]
_REACHABLE: dict[bool | None, Reachable] = {True: "yes", False: "no", None: "unknown"}


@dataclass(frozen=True, slots=True)
class Landing:
    pool: str
    model: str
    reachable: Reachable
    """`unknown` when the pod selects nodes by labels or fields the policy does not know."""
    labels: Mapping[str, str]
    """The node labels the policy gives this kind of node."""
    reasons: tuple[str, ...] = ()
    """Why it is not reachable (or not certainly), each a clause: "it does not tolerate ...",
    "spec.nodeSelector.gpu-pool: training does not match gpu-pool=inference"."""

    @property
    def describe(self) -> str:
        return f"{self.pool} ({self.model})"


def landings(policy: Policy, pod: PodView) -> tuple[Landing, ...]:
    return tuple(_landing(policy, pod, reach) for reach in reach_of(policy, pod))


def _landing(policy: Policy, pod: PodView, reach: Reach) -> Landing:
    reasons = [f"it does not tolerate {taint.describe()}" for taint in reach.untolerated]
    if reach.selected is False:
        found = exclusions(pod, reach.kind.labels, policy.node_label_keys)
        reasons.extend(not_matching((e, [reach.kind.labels]) for e in found))
    elif reach.selected is None:
        reasons.append(
            "its nodeSelector or required node affinity names node labels or fields the "
            f"policy does not know (it knows {policy.pool_label} and {policy.model_label})"
        )
    reachable = _REACHABLE[reach.reachable]
    return Landing(reach.kind.pool, reach.kind.model, reachable, reach.kind.labels, tuple(reasons))
