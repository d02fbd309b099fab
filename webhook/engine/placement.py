"""Where a pod may be scheduled, judged with Kubernetes' own semantics.

Each kind of node the policy knows (a pool and a GPU model) is judged against
the pod's nodeSelector, required node affinity and tolerations. Matching is
three-valued: a node label the policy does not know is unknown, not absent,
so a requirement on it gives UNKNOWN. Terms are ORed, requirements ANDed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.engine.pod import PodView
from webhook.policy.compiled import NodeKind, Policy, Taint

# Three-valued logic: True, False, or None for "cannot tell from what the policy knows".
Tri = bool | None
UNKNOWN: Tri = None

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(slots=True)  # built per review, never changed; not frozen (see engine.pod)
class Reach:
    """Whether a pod can reach a kind of node, and if not, why not."""

    kind: NodeKind
    selected: Tri
    untolerated: tuple[Taint, ...]

    @property
    def reachable(self) -> Tri:
        if self.untolerated:
            return False
        return self.selected

    @property
    def possibly(self) -> bool:
        return self.reachable is not False


def reach_of(policy: Policy, pod: PodView, kinds: Iterable[NodeKind] | None = None) -> list[Reach]:
    """How the pod reaches each of `kinds` (every kind the policy knows by default)."""
    known_keys = policy.node_label_keys
    return [
        Reach(
            kind=kind,
            selected=selects(pod, kind.labels, known_keys),
            untolerated=tuple(t for t in kind.taints if not tolerated(pod.tolerations, t)),
        )
        for kind in (policy.node_kinds if kinds is None else kinds)
    ]


def selects(pod: PodView, labels: Mapping[str, str], known_keys: frozenset[str]) -> Tri:
    """Whether nodeSelector and required node affinity both admit a node with these labels."""
    result: Tri = True
    for key, value in pod.node_selector.items():
        result = _and(result, requirement(key, "In", [value], labels, known_keys))
        if result is False:
            return False
    if pod.required_terms is not None:
        result = _and(result, _any_term(pod.required_terms, labels, known_keys))
    return result


def tolerated(tolerations: Sequence[Mapping[str, Any]], taint: Taint) -> bool:
    if taint.effect not in BLOCKING_EFFECTS:
        return True
    # A loop, not any() over a generator: that costs a pod about a microsecond more.
    for toleration in tolerations:  # noqa: SIM110
        if tolerates(toleration, taint):
            return True
    return False


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes' Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.key:
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == taint.value
    return False


def _any_term(
    terms: Sequence[Mapping[str, Any]], labels: Mapping[str, str], known_keys: frozenset[str]
) -> Tri:
    result: Tri = False
    for term in terms:
        result = _or(result, _term(term, labels, known_keys))
        if result is True:
            return True
    return result


def _term(term: Mapping[str, Any], labels: Mapping[str, str], known_keys: frozenset[str]) -> Tri:
    expressions = term.get("matchExpressions") or ()
    fields = term.get("matchFields") or ()
    if not expressions and not fields:
        return False  # an empty term matches no node
    result: Tri = True
    for expression in expressions:
        result = _and(
            result,
            requirement(
                expression["key"],
                expression["operator"],
                expression.get("values") or (),
                labels,
                known_keys,
            ),
        )
        if result is False:
            return False
    if fields:
        result = _and(result, UNKNOWN)  # node names are not known to the policy
    return result


def requirement(
    key: str,
    operator: str,
    values: Collection[str],
    labels: Mapping[str, str],
    known_keys: frozenset[str],
) -> Tri:
    """Whether a node with `labels` meets one requirement (a nodeSelector entry is `In`)."""
    if key not in known_keys:
        return UNKNOWN
    present = key in labels
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        bound = next(iter(values), None)
        if not present or value is None or bound is None:
            return False
        try:
            number, limit = int(value), int(bound)
        except ValueError:
            return False
        return number > limit if operator == "Gt" else number < limit
    return False  # kube-apiserver rejects other operators


def _and(left: Tri, right: Tri) -> Tri:
    if left is False or right is False:
        return False
    if left is None or right is None:
        return UNKNOWN
    return True


def _or(left: Tri, right: Tri) -> Tri:
    if left is True or right is True:
        return True
    if left is None or right is None:
        return UNKNOWN
    return False
