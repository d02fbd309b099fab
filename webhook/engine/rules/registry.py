"""How rules are declared, and how a registry of them judges one pod.

A ``Rule`` is a stable name, the pods it is for (a ``Scope``) and its checks. A
``Check`` finds violations in the pods of its own scope at one ``Step`` of judging a
pod; it may find violations of more than one rule (what `spec.nodeName` names can be
the wrong pool or the wrong GPU model) and be shared by those rules, and it runs once.
A ``Registry`` runs the checks a pod's standing calls for, step by step, gives each
violation the mode the policy gives its rule, and reports every rule's outcome: fail,
warn or audit with its violations' messages, else pass for the pods the rule is for
and skip for the others.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from webhook.engine.decision import ENFORCE, WARN, Outcome, RuleOutcome, Violation
from webhook.engine.rules.claims import NOT_JUDGED
from webhook.engine.rules.context import RuleContext, Scope, Standing
from webhook.errors import PolicyError
from webhook.policy.compiled import Policy


class Step(enum.IntEnum):
    """The order in which a pod is judged: its violations are listed step by step, the
    checks of one step in the order of their rules."""

    CONTAINERS = enum.auto()
    """What its containers set."""
    CLASS_LABEL = enum.auto()
    """Whether it has the class it needs."""
    QUANTITIES = enum.auto()
    """Its GPU quantities as written."""
    REQUEST = enum.auto()
    """Whether it requests a GPU at all."""
    MODEL_LABEL = enum.auto()
    """The GPU model it asks for."""
    PLACEMENT = enum.auto()
    """Where its scheduling fields let it go."""
    NODE = enum.auto()
    """The node it names, if any."""
    CAPACITY = enum.auto()
    """Whether what it requests fits a node."""
    PRIORITY = enum.auto()
    """Its PriorityClass."""


Find = Callable[[RuleContext], list[Violation]]


@dataclass(frozen=True, slots=True)
class Check:
    """One way of finding violations; listed by several rules, it still runs once."""

    step: Step
    scope: Scope
    """The pods it judges; it is not run for the others."""
    find: Find


@dataclass(frozen=True, slots=True)
class Rule:
    """A validation rule, declared once."""

    name: str
    """Stable: what its violations, `enforcement`, metrics and reports call it."""
    applies: Scope
    """The pods the rule is for: it passes or fails for them and is skipped for the others
    (where one of its checks may still find it broken: a pod of no class naming a GPU node,
    say, or using a class's PriorityClass)."""
    checks: tuple[Check, ...]


@dataclass(slots=True)  # built per review, never changed; not frozen (see engine.pod)
class Findings:
    """What the rules found in one pod."""

    violations: tuple[Violation, ...]
    """In the order found, each with the mode the policy gives its rule for the pod."""
    outcomes: tuple[RuleOutcome, ...]
    """One per rule, in the registry's order (then any rule a check found but the registry
    does not declare)."""


class Registry:
    """The validation rules, in the order reports list them."""

    rules: tuple[Rule, ...]
    names: tuple[str, ...]
    """The rule names a policy's `enforcement` may give modes."""
    skipped: tuple[RuleOutcome, ...]
    """Every rule skipped: the outcomes for a pod the policy exempts."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)
        self.names = tuple(rule.name for rule in self.rules)
        twice = sorted({name for name in self.names if self.names.count(name) > 1})
        if twice:
            raise ValueError(f"a rule is declared twice: {', '.join(twice)}")
        checks = sorted(
            dict.fromkeys(check for rule in self.rules for check in rule.checks),
            key=lambda check: check.step,
        )
        self._checks = {s: tuple(c for c in checks if s in c.scope) for s in Standing}
        self._clean = {
            s: tuple(RuleOutcome(r.name, "pass" if s in r.applies else "skip") for r in self.rules)
            for s in Standing
        }
        self.skipped = tuple(RuleOutcome(name, "skip") for name in self.names)

    def with_rules(self, *rules: Rule) -> Registry:
        """These rules, then `rules`."""
        return Registry((*self.rules, *rules))

    def refuse_unknown_rules(self, policy: Policy) -> None:
        """Raise PolicyError, at its field, for a rule `enforcement` names that is not here."""
        for path, rule in policy.named_rules:
            if rule not in self.names:
                raise PolicyError(
                    policy.source, path, f"unknown rule {rule!r}; rules: {', '.join(self.names)}"
                )

    def judge(self, context: RuleContext) -> Findings:
        """Run the checks for pods where this one stands, step by step."""
        found: list[Violation] = []
        for check in self._checks[context.standing]:
            found += check.find(context)
        if not found:
            return Findings((), self._clean[context.standing])
        violations = with_modes(context.policy, context.label, found)
        return Findings(violations, self._outcomes(context.standing, violations))

    def _outcomes(
        self, standing: Standing, violations: tuple[Violation, ...]
    ) -> tuple[RuleOutcome, ...]:
        found: dict[str, list[Violation]] = {}
        for violation in violations:
            found.setdefault(violation.rule, []).append(violation)
        outcomes = [
            _failed(clean.rule, found[clean.rule]) if clean.rule in found else clean
            for clean in self._clean[standing]
        ]
        outcomes += [_failed(name, found[name]) for name in found if name not in self.names]
        return tuple(outcomes)


def with_modes(
    policy: Policy, label: str | None, violations: Iterable[Violation]
) -> tuple[Violation, ...]:
    """`violations` of a pod whose class label is `label`, each with its rule's mode (at
    most a warning for an advisory rule's), a rule that could not judge kept as one."""
    return tuple(type(v)(v.rule, v.message, _mode(policy, v.rule, label)) for v in violations)


ADVISORY_RULES = frozenset({NOT_JUDGED})
"""Rules that say what the policy could not judge: never a reason to refuse."""


def _mode(policy: Policy, rule: str, label: str | None) -> str:
    mode = policy.mode_of(rule, label)
    return WARN if mode == ENFORCE and rule in ADVISORY_RULES else mode


def _failed(rule: str, violations: list[Violation]) -> RuleOutcome:
    modes = [v.mode for v in violations]
    outcome: Outcome = "fail" if ENFORCE in modes else "warn" if WARN in modes else "audit"
    return RuleOutcome(rule, outcome, tuple(v.message for v in violations))
