"""Which field of a pod keeps it off a kind of node, and with which value: what a denial names.

``placement.selects`` only answers whether a pod's nodeSelector and required node
affinity admit a node with some labels; it stops at the first clause that rules the
node out and says nothing of it. A pod refused for that must be told which clause:
`spec.nodeSelector.gpu-pool: training`, or the requirement of each required term (terms
are ORed, so every term fails) and the node label it does not match. Finding that costs
a second look at the pod, so only the path that refuses it (and the offline reports)
call this; a pod that passes never does.

The other way round, a pod refused for reaching nodes it should not is told which of its
tolerations lets it past their taints (``tolerating``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.engine.decision import shorten
from webhook.engine.placement import BLOCKING_EFFECTS, requirement, tolerates
from webhook.engine.pod import PodView
from webhook.policy.compiled import Taint

REQUIRED_TERMS = (
    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
)

CLAUSES_LIMIT = 3
"""Most clauses a message names, the rest counted: a term's path alone is over 100
characters, and three with their values and labels fit in one violation's message
(decision.VIOLATION_LIMIT)."""


@dataclass(frozen=True, slots=True)
class Exclusion:
    """One clause of a pod's node selection that certainly rules out a kind of node."""

    field: str
    """Its exact path: `spec.nodeSelector.gpu-pool`, `<REQUIRED_TERMS>[0].matchExpressions[1]`
    or, for a term with nothing in it, `<REQUIRED_TERMS>[2]`."""
    wants: str
    """What it asks, as written (user values shortened): `training`, `gpu-pool In [a, b]`;
    empty for an empty term."""
    key: str | None
    """The node label it reads; None for an empty term."""

    @property
    def describe(self) -> str:
        if self.key is None:
            return f"{self.field} (an empty term, which matches no node)"
        if self.field.startswith("spec.nodeSelector."):
            return f"{self.field}: {self.wants}"
        return f"{self.field} ({self.wants})"


def exclusions(
    pod: PodView, labels: Mapping[str, str], known_keys: frozenset[str]
) -> list[Exclusion]:
    """The clauses that rule out a node with `labels`: each nodeSelector entry it does not
    match and, when no required term matches it, the first requirement of each term that
    does not (or the term itself when it is empty). Empty when `selects` is not False."""
    found = [
        Exclusion(f"spec.nodeSelector.{key}", shorten(value), key)
        for key, value in pod.node_selector.items()
        if requirement(key, "In", (value,), labels, known_keys) is False
    ]
    terms = pod.required_terms
    if terms is None:
        return found
    failing: list[Exclusion] = []
    for index, term in enumerate(terms):
        exclusion = _term_exclusion(index, term, labels, known_keys)
        if exclusion is None:
            return found  # this term may match: the terms do not rule the node out
        failing.append(exclusion)
    return found + failing


def _term_exclusion(
    index: int, term: Mapping[str, Any], labels: Mapping[str, str], known_keys: frozenset[str]
) -> Exclusion | None:
    expressions = term.get("matchExpressions") or ()
    if not expressions and not term.get("matchFields"):
        return Exclusion(f"{REQUIRED_TERMS}[{index}]", "", None)
    for position, expression in enumerate(expressions):
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or ()
        if requirement(key, operator, values, labels, known_keys) is False:
            return Exclusion(
                f"{REQUIRED_TERMS}[{index}].matchExpressions[{position}]",
                _wants(key, operator, values),
                key,
            )
    return None


def _wants(key: str, operator: str, values: Collection[str]) -> str:
    if operator in ("Exists", "DoesNotExist") and not values:
        return f"{key} {shorten(operator)}"
    return f"{key} {shorten(operator)} [{shorten(', '.join(values))}]"


def node_values(key: str, labels: Iterable[Mapping[str, str]]) -> str:
    """What nodes with each of `labels` have under `key`: `gpu-pool=inference`,
    `nvidia-gpu-model=V100 or A100`, `no label gpu-pool`."""
    values = list(dict.fromkeys(one.get(key) for one in labels))
    present = [v for v in values if v is not None]
    shown = [f"{key}={' or '.join(present)}"] if present else []
    if None in values:
        shown.append(f"no label {key}")
    return " or ".join(shown)


def not_matching(
    found: Iterable[tuple[Exclusion, list[Mapping[str, str]]]], limit: int = CLAUSES_LIMIT
) -> list[str]:
    """Each clause and the node labels it does not match, `limit` of them and a count of
    the others: `spec.nodeSelector.gpu-pool: training does not match gpu-pool=inference`."""
    clauses = [
        exclusion.describe
        if exclusion.key is None
        else f"{exclusion.describe} does not match {node_values(exclusion.key, labels)}"
        for exclusion, labels in found
    ]
    if len(clauses) > limit:
        more = len(clauses) - limit
        clauses[limit:] = [
            "1 more clause that does not match either"
            if more == 1
            else f"{more:,} more clauses that do not match either"
        ]
    return clauses


def tolerating(
    tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Taint], limit: int = CLAUSES_LIMIT
) -> list[str]:
    """Each toleration that tolerates one of the blocking `taints`, by path and as written,
    and the taints it tolerates, `limit` of them and a count of the others:
    `spec.tolerations[0] {operator: Exists} tolerates gpu-pool=training:NoSchedule`."""
    blocking = [t for t in dict.fromkeys(taints) if t.effect in BLOCKING_EFFECTS]
    found = []
    for index, toleration in enumerate(tolerations):
        tolerated = [t.describe() for t in blocking if tolerates(toleration, t)]
        if tolerated:
            found.append(
                f"spec.tolerations[{index}] {_as_written(toleration)} tolerates "
                f"{', '.join(tolerated)}"
            )
    if len(found) > limit:
        found[limit:] = [f"{len(found) - limit:,} more tolerations that do too"]
    return found


def _as_written(toleration: Mapping[str, Any]) -> str:
    fields = (
        f"{name}: {shorten(str(toleration[name]))}"
        for name in ("key", "operator", "value", "effect")
        if toleration.get(name) not in (None, "")
    )
    return "{" + ", ".join(fields) + "}"
