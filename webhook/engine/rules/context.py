"""What a rule's check is given: the pod, where it stands with the policy's classes, the policy
and the capacity now.

Where a pod stands (``Standing``) decides which checks judge it: a pod with no
workload class label and one whose label names a class are held to different
rules. A ``Scope`` is the standings a check (or a rule) is for.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from webhook.engine.capacity.now import CapacityNow
from webhook.engine.dra.pod_claims import NONE, PodClaims
from webhook.engine.placement_answers import NoAnswers, PlacementAnswers
from webhook.engine.placement_index import PlacementIndex
from webhook.engine.pod import PodView
from webhook.engine.resources import pod_requests_gpu
from webhook.policy.compiled import Policy, WorkloadClass

NO_ANSWERS: PlacementAnswers = NoAnswers()


class Standing(enum.Enum):
    """Where a pod stands with the policy's workload classes."""

    NO_CLASS_NO_GPU = "pods with no workload class label that request no GPU"
    NO_CLASS_WITH_GPU = "pods with no workload class label that request or claim GPUs"
    UNKNOWN_CLASS = "pods whose workload class label names no class"
    KNOWN_CLASS = "pods of a workload class of the policy"


Scope = frozenset[Standing]

EVERY_POD: Scope = frozenset(Standing)
NO_CLASS: Scope = frozenset({Standing.NO_CLASS_NO_GPU, Standing.NO_CLASS_WITH_GPU})
NO_CLASS_NO_GPU: Scope = frozenset({Standing.NO_CLASS_NO_GPU})
CLASS_PODS: Scope = frozenset({Standing.KNOWN_CLASS})
WANTING_A_CLASS: Scope = frozenset({Standing.NO_CLASS_WITH_GPU, Standing.UNKNOWN_CLASS})
"""GPU pods without a class label, and pods whose label names no class."""
EVERY_POD_BUT_UNKNOWN_CLASS: Scope = NO_CLASS | CLASS_PODS
"""A pod whose label names no class is told only that (and what its containers set)."""


@dataclass(slots=True)  # built per review, never changed; not frozen (see engine.pod)
class RuleContext:
    policy: Policy
    pod: PodView
    label: str | None
    """The value of the pod's workload class label; None without one."""
    workload: WorkloadClass | None
    """The class the label names; None without a label, or when it names no class."""
    standing: Standing
    now: CapacityNow
    placement: PlacementIndex
    """The policy's kinds of node, indexed: which ones the pod can possibly reach."""
    claims: PodClaims = NONE
    """Its claims (Dynamic Resource Allocation), resolved."""
    answers: PlacementAnswers = NO_ANSWERS
    """The engine's placement findings so far, by the fields they depend on."""

    @classmethod
    def of(
        cls,
        policy: Policy,
        pod: PodView,
        now: CapacityNow,
        placement: PlacementIndex,
        claims: PodClaims = NONE,
        answers: PlacementAnswers = NO_ANSWERS,
    ) -> RuleContext:
        label = pod.labels.get(policy.workload_label)
        workload = policy.classes.get(label) if label is not None else None
        if workload is not None:
            standing = Standing.KNOWN_CLASS
        elif label is not None:
            standing = Standing.UNKNOWN_CLASS
        elif pod_requests_gpu(policy, pod) or claims.asks_gpus:
            standing = Standing.NO_CLASS_WITH_GPU
        else:
            standing = Standing.NO_CLASS_NO_GPU
        return cls(policy, pod, label, workload, standing, now, placement, claims, answers)

    @property
    def known_class(self) -> WorkloadClass:
        """The pod's class, for the checks scoped to class pods."""
        if self.workload is None:
            raise LookupError(f"a check for class pods was given {self.standing.value}")
        return self.workload
