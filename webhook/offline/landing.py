"""Where a pod could land: each kind of GPU node (a pool and a GPU model of the policy, its
nodes of other models or none, nodes of a pool it does not name), and why not.

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
from webhook.policy.compiled import LISTED, NodeKind, Policy

Reachable = Literal["yes", "no", "unknown"]
_REACHABLE: dict[bool | None, Reachable] = {True: "yes", False: "no", None: "unknown"}


@dataclass(frozen=True, slots=True)
class Landing:
    pool: str
    """The pool of the policy; empty for a pool it does not name."""
    model: str
    """The GPU model of the policy; empty for a model it does not list, or none."""
    reachable: Reachable
    """`unknown` when the pod selects nodes by labels or fields the policy does not know."""
    labels: Mapping[str, str]
    """The node labels the policy gives this kind of node."""
    reasons: tuple[str, ...] = ()
    """Why it is not reachable (or not certainly), each a clause: "it does not tolerate ...",
    "spec.nodeSelector.gpu-pool: training does not match gpu-pool=inference"."""
    shape: str = LISTED
    """Which kind of node (``webhook.policy.compiled``: listed, unlisted-model, ...)."""
    pool_shown: str = ""
    """The pool as a person reads it: its name, or `a pool the policy does not name`."""
    model_shown: str = ""
    """The model as a person reads it: `A100`, `a model the pool does not list`, ..."""

    @property
    def describe(self) -> str:
        return f"{self.pool_shown} ({self.model_shown})"


def landings(policy: Policy, pod: PodView) -> tuple[Landing, ...]:
    return tuple(_landing(policy, pod, reach) for reach in reach_of(policy, pod))


def _landing(policy: Policy, pod: PodView, reach: Reach) -> Landing:
    kind = reach.kind
    reasons = [f"it does not tolerate {taint.describe()}" for taint in reach.untolerated]
    if reach.selected is False:
        found = [
            e
            for e in exclusions(pod, kind.labels, policy.node_label_keys)
            if e.key not in kind.open_labels
        ]
        reasons.extend(not_matching((e, [kind.labels]) for e in found))
        if not found:
            reasons.append(
                "its nodeSelector or required node affinity rules such nodes out "
                f"({_open_values(policy, kind)})"
            )
    elif reach.selected is None:
        reasons.append(
            "its nodeSelector or required node affinity names node labels or fields the "
            f"policy does not know (it knows {policy.pool_label} and {policy.model_label})"
        )
    return Landing(
        kind.pool,
        kind.model,
        _REACHABLE[reach.reachable],
        kind.labels,
        tuple(reasons),
        kind.shape,
        kind.pool or "a pool the policy does not name",
        _model_shown(policy, kind),
    )


def _open_values(policy: Policy, kind: NodeKind) -> str:
    """What such nodes' labels of open values are: `their gpu-pool label names no pool of
    the policy`."""
    if policy.pool_label in kind.open_labels:
        return f"their {policy.pool_label} label names no pool of the policy"
    return f"their {policy.model_label} label names no model the pool lists"


def _model_shown(policy: Policy, kind: NodeKind) -> str:
    if kind.listed:
        return kind.model
    if policy.model_label not in kind.labels and policy.model_label not in kind.open_labels:
        return f"no {policy.model_label} label"
    if kind.pool:
        return "a GPU model it does not list"
    return "any GPU model"
