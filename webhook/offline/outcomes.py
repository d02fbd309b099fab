"""Each validation rule's outcome for one pod: pass, fail with its messages, or skip.

A rule fails when the engine reported an enforced violation of it; a violation
the policy's `enforcement` puts in `warn` or `audit` mode gives that outcome. Of the others, those
the engine ran for this pod pass and the rest are skipped: a pod without a
workload class label skips the class rules, a GPU pod skips the rule for pods
without GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from webhook.engine.decision import ENFORCE, WARN, Violation
from webhook.engine.pod import PodView
from webhook.engine.resources import pod_requests_gpu
from webhook.engine.rules import capacity, placement, priority, quantities, visibility
from webhook.engine.rules import workload_class as class_rule
from webhook.policy.compiled import Policy

Outcome = Literal["pass", "fail", "warn", "audit", "skip"]

CLASS_RULES = (
    placement.WRONG_POOL,
    placement.MODEL,
    quantities.RULE,
    capacity.COUNT,
    capacity.MIG,
    priority.RULE,
)
"""The rules for pods of a workload class."""

VALIDATION_RULES = (visibility.RULE, class_rule.RULE, placement.NON_GPU, *CLASS_RULES)
"""Every validation rule, in the order reports list them."""


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    rule: str
    outcome: Outcome
    messages: tuple[str, ...] = ()
    """The violations' messages when the rule failed."""


def rule_outcomes(
    policy: Policy, pod: PodView, violations: Iterable[Violation]
) -> tuple[RuleOutcome, ...]:
    """The outcome of every validation rule (and of any rule the engine added since)."""
    messages: dict[str, list[str]] = {}
    modes: dict[str, set[str]] = {}
    for violation in violations:
        messages.setdefault(violation.rule, []).append(violation.message)
        modes.setdefault(violation.rule, set()).add(violation.mode)
    ran = rules_run_for(policy, pod)
    outcomes = []
    for rule in dict.fromkeys([*VALIDATION_RULES, *messages]):
        if rule in messages:
            outcomes.append(RuleOutcome(rule, _failure(modes[rule]), tuple(messages[rule])))
        else:
            outcomes.append(RuleOutcome(rule, "pass" if rule in ran else "skip"))
    return tuple(outcomes)


def rules_run_for(policy: Policy, pod: PodView) -> frozenset[str]:
    """The rules the engine checks this pod against (see Engine.pod_violations)."""
    label = pod.labels.get(policy.workload_label)
    if label is None:
        if pod_requests_gpu(policy, pod):
            return frozenset({visibility.RULE, class_rule.RULE})
        return frozenset({visibility.RULE, class_rule.RULE, placement.NON_GPU})
    if label not in policy.classes:
        return frozenset({visibility.RULE, class_rule.RULE})
    return frozenset({visibility.RULE, class_rule.RULE, *CLASS_RULES})


def _failure(modes: set[str]) -> Outcome:
    if ENFORCE in modes:
        return "fail"
    return "warn" if WARN in modes else "audit"
