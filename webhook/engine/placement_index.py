"""The kinds of node a pod can possibly reach, found without judging every kind.

Judging a pod against each kind of node the policy knows (``placement.reach_of``)
costs time in proportion to the policy's pools and models: 9.5 µs per pool and class
on a generated policy, 1.9 ms a pod at 200. Yet most pods rule out all but a few kinds
in a way an index finds at once: a class pod's required node affinity asks for its
pools' label values (`In`), which our mutation injects, and a pod without such a
requirement tolerates the taints of only a few pools, often none.

``PlacementIndex`` is built once per policy. Its ``candidates`` for a pod are the kinds
not ruled out by either index: every other kind is certainly unreachable (a requirement
`In` on a label the policy knows excludes it, or it has a blocking taint the pod does
not tolerate), so judging the candidates alone finds every kind the pod possibly
reaches, and what the rules say of them, exactly as judging every kind does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.engine.placement import BLOCKING_EFFECTS, tolerates
from webhook.engine.pod import PodView
from webhook.policy.compiled import NodeKind, Policy, Taint


@dataclass(frozen=True, slots=True)
class PlacementIndex:
    kinds: tuple[NodeKind, ...]
    """The policy's kinds of node, in its order."""
    by_label: Mapping[str, Mapping[str, frozenset[int]]]
    """Known node label -> its value -> the positions of the kinds with that value."""
    open_by_label: Mapping[str, tuple[tuple[int, frozenset[str]], ...]]
    """Known node label -> (position, values it does not have) of each kind that has the
    label with some other value."""
    by_class: Mapping[str, frozenset[int]]
    """Class -> the positions of the kinds of its pools."""
    kinds_of_class: Mapping[str, tuple[NodeKind, ...]]
    """Class -> the kinds of its pools, in the policy's order."""
    untainted: frozenset[int]
    """The kinds with no blocking taint (NoSchedule, NoExecute)."""
    by_rarest_taint: Mapping[Taint, frozenset[int]]
    """Each kind with blocking taints, under the one that fewest kinds have: a pod that
    does not tolerate that taint cannot reach the kind."""
    taints_by_key: Mapping[str, tuple[Taint, ...]]
    """The blocking taints of the kinds, by key."""
    taints_by_key_value: Mapping[tuple[str, str], tuple[Taint, ...]]
    """The blocking taints of the kinds, by key and value."""
    open_taints_by_key: Mapping[str, tuple[Taint, ...]]
    """The blocking taints whose value is any but a few (``Taint.other_than``), by key."""

    @classmethod
    def of(cls, policy: Policy) -> PlacementIndex:
        kinds = policy.node_kinds
        by_label: dict[str, dict[str, set[int]]] = {key: {} for key in policy.node_label_keys}
        open_by_label: dict[str, list[tuple[int, frozenset[str]]]] = {}
        blocking: list[tuple[Taint, ...]] = []
        holders: dict[Taint, int] = {}
        for position, kind in enumerate(kinds):
            for key, value in kind.labels.items():
                if key in by_label:
                    by_label[key].setdefault(value, set()).add(position)
            for key, excluded in kind.open_labels.items():
                open_by_label.setdefault(key, []).append((position, excluded))
            taints = tuple(dict.fromkeys(t for t in kind.taints if t.effect in BLOCKING_EFFECTS))
            blocking.append(taints)
            for taint in taints:
                holders[taint] = holders.get(taint, 0) + 1
        by_rarest: dict[Taint, set[int]] = {}
        for position, taints in enumerate(blocking):
            if taints:
                rarest = min(taints, key=holders.__getitem__)
                by_rarest.setdefault(rarest, set()).add(position)
        by_key: dict[str, list[Taint]] = {}
        by_key_value: dict[tuple[str, str], list[Taint]] = {}
        open_by_key: dict[str, list[Taint]] = {}
        for taint in holders:
            by_key.setdefault(taint.key, []).append(taint)
            if taint.other_than is None:
                by_key_value.setdefault((taint.key, taint.value), []).append(taint)
            else:
                open_by_key.setdefault(taint.key, []).append(taint)
        return cls(
            kinds=kinds,
            by_label={
                key: {value: frozenset(found) for value, found in values.items()}
                for key, values in by_label.items()
            },
            open_by_label={key: tuple(found) for key, found in open_by_label.items()},
            by_class={
                name: frozenset(p for p, kind in enumerate(kinds) if kind.pool in workload.pools)
                for name, workload in policy.classes.items()
            },
            kinds_of_class={
                name: tuple(kind for kind in kinds if kind.pool in workload.pools)
                for name, workload in policy.classes.items()
            },
            untainted=frozenset(p for p, taints in enumerate(blocking) if not taints),
            by_rarest_taint={taint: frozenset(found) for taint, found in by_rarest.items()},
            taints_by_key={key: tuple(taints) for key, taints in by_key.items()},
            taints_by_key_value={key: tuple(taints) for key, taints in by_key_value.items()},
            open_taints_by_key={key: tuple(taints) for key, taints in open_by_key.items()},
        )

    def candidates(self, pod: PodView, workload: str | None = None) -> tuple[NodeKind, ...]:
        """The kinds `pod` may possibly reach (and those of class `workload`'s pools), in the
        policy's order: a superset of the kinds it possibly reaches."""
        found = self._selectable(pod)
        if found is None:
            found = self._tolerable(pod.tolerations)
        if found is None:
            return self.kinds
        if workload is not None:
            own = self.by_class.get(workload, frozenset())
            if found <= own:  # a class pod kept to its pools: the common case
                return self.kinds_of_class.get(workload, ())
            found = found | own
        return tuple(self.kinds[p] for p in sorted(found))

    def _selectable(self, pod: PodView) -> frozenset[int] | None:
        """The kinds that no requirement `In` on a known label excludes; None when no such
        requirement narrows them. nodeSelector and the required terms are ANDed, the terms
        ORed, a term's requirements ANDed; an empty term selects no node."""
        found: frozenset[int] | None = None
        for key, value in pod.node_selector.items():
            found = _and(found, self._with_label(key, (value,)))
        if pod.required_terms is not None:
            found = _and(found, self._any_term(pod.required_terms))
        return found

    def _any_term(self, terms: Sequence[Mapping[str, Any]]) -> frozenset[int] | None:
        found: frozenset[int] = frozenset()
        for term in terms:
            one = self._term(term)
            if one is None:
                return None
            found = found | one
        return found

    def _term(self, term: Mapping[str, Any]) -> frozenset[int] | None:
        expressions = term.get("matchExpressions") or ()
        if not expressions and not term.get("matchFields"):
            return frozenset()
        found: frozenset[int] | None = None
        for expression in expressions:
            if expression["operator"] == "In":
                values = expression.get("values") or ()
                found = _and(found, self._with_label(expression["key"], values))
        return found

    def _with_label(self, key: str, values: Collection[str]) -> frozenset[int] | None:
        """The kinds whose label `key` has one of `values`; None for a label the policy does
        not know (its requirement is unknown, it excludes nothing)."""
        by_value = self.by_label.get(key)
        if by_value is None:
            return None
        found: frozenset[int] = frozenset()
        for value in values:
            found = found | by_value.get(value, frozenset())
        for position, excluded in self.open_by_label.get(key, ()):
            if any(value not in excluded for value in values):
                found = found | {position}
        return found

    def _tolerable(self, tolerations: Sequence[Mapping[str, Any]]) -> frozenset[int] | None:
        """The kinds whose rarest blocking taint the pod tolerates, and those with none; None
        when a toleration with no key may tolerate every taint."""
        tolerated: set[Taint] = set()
        for toleration in tolerations:
            key = toleration.get("key") or ""
            if not key:
                return None
            operator = toleration.get("operator") or "Equal"
            if operator == "Exists":
                taints = self.taints_by_key.get(key, ())
            elif operator == "Equal":
                value = toleration.get("value") or ""
                taints = (
                    *self.taints_by_key_value.get((key, value), ()),
                    *self.open_taints_by_key.get(key, ()),
                )
            else:
                continue  # tolerates nothing
            tolerated.update(t for t in taints if tolerates(toleration, t))
        found = self.untainted
        for taint in tolerated:
            found = found | self.by_rarest_taint.get(taint, frozenset())
        return found


def _and(left: frozenset[int] | None, right: frozenset[int] | None) -> frozenset[int] | None:
    """None stands for every kind."""
    if left is None:
        return right
    if right is None:
        return left
    return left & right
