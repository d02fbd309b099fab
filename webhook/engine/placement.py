"""Where a pod may be scheduled, judged with Kubernetes' own semantics.

Each kind of GPU node a cluster can hold (``Policy.node_kinds``: the policy's pools and
models, their nodes of other models or of none, nodes of pools the policy does not name)
is judged against the pod's nodeSelector, required node affinity and tolerations.
Matching is three-valued: a node label the policy does not know is unknown, not absent,
so a requirement on it gives UNKNOWN. Terms are ORed, requirements ANDed. A label a kind
has with "any value but these" (``NodeKind.open_labels``) matches when some such value
meets every requirement on it in one term (``webhook.engine.open_values``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.engine.open_values import OpenValues, parse_int64
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
            selected=selects(pod, kind.labels, known_keys, kind.open_labels),
            untolerated=tuple(t for t in kind.taints if not tolerated(pod.tolerations, t)),
        )
        for kind in (policy.node_kinds if kinds is None else kinds)
    ]


def selects(
    pod: PodView,
    labels: Mapping[str, str],
    known_keys: frozenset[str],
    open_labels: Mapping[str, frozenset[str]] | None = None,
) -> Tri:
    """Whether nodeSelector and required node affinity both admit a node with these labels
    (and, for each key of `open_labels`, a value other than those it lists)."""
    if open_labels:
        return _selects_open(pod, labels, known_keys, open_labels)
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
        value = toleration.get("value") or ""
        if taint.other_than is not None:  # some value of no pool of the policy's
            return bool(key) and value not in taint.other_than
        return bool(key) and value == taint.value
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


def _selects_open(
    pod: PodView,
    labels: Mapping[str, str],
    known_keys: frozenset[str],
    open_labels: Mapping[str, frozenset[str]],
) -> Tri:
    """`selects` for a kind with labels of open values: the requirements on each such label
    are gathered per term (with the nodeSelector's), and the term matches only if one value
    meets them all."""
    base: Tri = True
    asked = {key: OpenValues() for key in open_labels}
    for key, value in pod.node_selector.items():
        if key in asked:
            asked[key].add("In", (value,))
        else:
            base = _and(base, requirement(key, "In", (value,), labels, known_keys))
            if base is False:
                return False
    terms = pod.required_terms
    if terms is None:
        return _and(base, _some_values(asked, open_labels))
    result: Tri = False
    for term in terms:
        expressions = term.get("matchExpressions") or ()
        fields = term.get("matchFields") or ()
        if not expressions and not fields:
            continue  # an empty term matches no node
        matched: Tri = UNKNOWN if fields else base
        in_term = {key: values.copy() for key, values in asked.items()}
        for expression in expressions:
            key, operator = expression["key"], expression["operator"]
            values = expression.get("values") or ()
            if key in in_term:
                in_term[key].add(operator, values)
            else:
                matched = _and(matched, requirement(key, operator, values, labels, known_keys))
                if matched is False:
                    break
        if matched is not False:
            matched = _and(_and(matched, base), _some_values(in_term, open_labels))
        result = _or(result, matched)
        if result is True:
            return True
    return result


def _some_values(asked: Mapping[str, OpenValues], open_labels: Mapping[str, frozenset[str]]) -> Tri:
    return all(values.met_by_some(open_labels[key]) for key, values in asked.items())


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
        number = parse_int64(value) if value is not None else None
        limit = parse_int64(next(iter(values), ""))
        if number is None or limit is None:
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
