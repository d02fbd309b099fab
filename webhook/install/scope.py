"""Whether the installed webhook configurations send what the policy in force needs.

The configurations are rendered from a policy (``webhook.install.configurations``):
the objectSelector from its workload label, the namespaceSelector from its opt-in
label, the CEL conditions from its labels, taints, resources and DeviceClasses, the
workloads' rules from its kinds. Installed from another policy (a chart rendered from
the default one, or a policy ConfigMap edited since), they select pods the policy
does not know and miss those it governs, and nothing else says so.

``scope_differences`` compares, webhook by webhook, only what the policy decides:
rules, the namespaceSelector's opt-in (not the namespaces an operator exempts),
objectSelector and matchConditions. clientConfig, caBundle, failurePolicy and
timeoutSeconds are the operator's to set and never differ here. Each difference
carries a short reason a person can act on.

``scope_digest`` names what a policy needs of its webhooks in one string: the value of
the ``SCOPE_ANNOTATION`` of the policy ConfigMap that `install` and the chart render (and
that `manifests webhooks` prints for a kustomize overlay). A Helm upgrade or `kubectl
apply -k` writes the ConfigMap before the configurations, so the policy ConfigMap's
webhook admits a policy whose ConfigMap says its configurations come in the same apply,
and compares any other with the live configurations.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.decision import DENIAL_LIMIT, shorten
from webhook.engine.handlers import HANDLERS, HandlerRegistry
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.policy import Policy

__all__ = [
    "FIX",
    "SCOPED_FIELDS",
    "SCOPE_ANNOTATION",
    "LiveWebhooks",
    "ScopeDifference",
    "canonical_json",
    "needed_scope",
    "needed_webhooks",
    "scope_differences",
    "scope_digest",
    "scope_refusal",
]

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"

_NAMESPACE_NAME = "kubernetes.io/metadata.name"
_LITERAL = re.compile(r"'([^']*)'")
# Where kube-apiserver reaches the service is not compared: any endpoint renders the same scope.
_ANY_ENDPOINT = Endpoint(ca_bundle="", url="https://scope.invalid")

SCOPED_FIELDS = ("rules", "objectSelector", "matchConditions")
"""The fields of a webhook its policy decides (with the namespaceSelector's opt-in)."""

SCOPE_ANNOTATION = "gpu-admission.io/webhook-scope"
"""The policy ConfigMap's annotation: ``scope_digest`` of its policy, written by what
renders the ConfigMap together with the webhook configurations of that policy."""

FIX = (
    "apply the webhook configurations of the policy with it: for a Helm release, "
    "`gpu-admission manifests helm-values --policy FILE > VALUES` then "
    "`helm upgrade RELEASE CHART -f VALUES`; otherwise `gpu-admission install --policy FILE` "
    "(kustomize: docs/troubleshooting.md)"
)
"""What a person does about configurations that differ from what the policy needs: the
one wording of the replica's report and of the policy ConfigMap's refusal."""

DIFFERENCES_LIMIT = 3
"""Most differences a refusal lists; the rest are counted."""

DIFFERENCE_LENGTH = 600
"""Longest difference a refusal quotes (a selector unlike the policy's is quoted whole),
so that ``FIX`` always fits after them."""


@dataclass(frozen=True)
class ScopeDifference:
    """One webhook that does not send what the policy needs, and why."""

    kind: str
    webhook: str
    reason: str

    def __str__(self) -> str:
        return f"{self.webhook}: {self.reason}"


def needed_webhooks(
    policy: Policy, handlers: HandlerRegistry = HANDLERS
) -> dict[str, dict[str, dict[str, Any]]]:
    """The webhooks the policy needs of `handlers`, by configuration kind and webhook name."""
    mutating, validating = render_webhook_configurations(policy, _ANY_ENDPOINT, handlers=handlers)
    return {
        MUTATING: {hook["name"]: hook for hook in mutating["webhooks"]},
        VALIDATING: {hook["name"]: hook for hook in validating["webhooks"]},
    }


def needed_scope(policy: Policy) -> dict[str, Any]:
    """What the policy decides of its webhooks: its namespace opt-in label, and each
    webhook's ``SCOPED_FIELDS`` by webhook name (the names are unique across both
    configurations). The chart's ``webhookScope`` value holds the same webhooks."""
    key, value = policy.namespace_opt_in
    webhooks = {
        name: {field: hook[field] for field in SCOPED_FIELDS if field in hook}
        for hooks in needed_webhooks(policy).values()
        for name, hook in hooks.items()
    }
    return {"namespaceOptIn": {"key": key, "value": value}, "webhooks": webhooks}


def scope_digest(policy: Policy) -> str:
    """``sha256:<hex>`` of ``needed_scope`` in ``canonical_json``: equal for two policies
    that need the same webhook configurations, whatever else they differ in."""
    return "sha256:" + hashlib.sha256(canonical_json(needed_scope(policy))).hexdigest()


_GO_ESCAPES = {
    "&": "\\u0026",
    "<": "\\u003c",
    ">": "\\u003e",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_GO_ESCAPED = re.compile("[&<>\u2028\u2029]")


def canonical_json(value: Any) -> bytes:
    """``value`` as Go's encoding/json writes it, which is what Helm's ``toJson`` gives
    (the chart hashes the scope in its template): keys sorted, no spaces, UTF-8, and
    ``&``, ``<``, ``>``, U+2028 and U+2029 escaped. These characters only occur within
    strings, so they are replaced after Python's encoding, which writes the rest alike."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _GO_ESCAPED.sub(lambda match: _GO_ESCAPES[match.group()], text).encode("utf-8")


@dataclass(frozen=True)
class LiveWebhooks:
    """The webhooks of the live (mutating, validating) configurations as last read, None
    for one that does not exist; picklable, with a digest of what it holds."""

    mutating: tuple[Mapping[str, Any], ...] | None
    validating: tuple[Mapping[str, Any], ...] | None
    digest: str = field(default="", compare=False)

    @classmethod
    def read(
        cls, mutating: Mapping[str, Any] | None, validating: Mapping[str, Any] | None
    ) -> LiveWebhooks:
        """The webhooks of two configurations as read from the API."""
        webhooks = [
            None if configuration is None else tuple(configuration.get("webhooks") or ())
            for configuration in (mutating, validating)
        ]
        digest = hashlib.sha256(canonical_json(webhooks)).hexdigest()
        return cls(webhooks[0], webhooks[1], digest)

    def configurations(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The two configurations as ``scope_differences`` takes them."""
        return (
            None if self.mutating is None else {"webhooks": list(self.mutating)},
            None if self.validating is None else {"webhooks": list(self.validating)},
        )


def scope_differences(
    policy: Policy,
    mutating: Mapping[str, Any] | None,
    validating: Mapping[str, Any] | None,
    handlers: HandlerRegistry = HANDLERS,
) -> list[ScopeDifference]:
    """What differs between the configurations the policy needs of `handlers` and the live
    ones (as read from the API, JSON dicts; None for one that does not exist), in webhook
    order."""
    needed = needed_webhooks(policy, handlers)
    differences: list[ScopeDifference] = []
    for kind, live in ((MUTATING, mutating), (VALIDATING, validating)):
        if live is None:
            differences.extend(
                ScopeDifference(kind, name, f"the {kind} is not installed") for name in needed[kind]
            )
            continue
        differences.extend(_differences(kind, needed[kind], live.get("webhooks") or []))
    return differences


def scope_refusal(name: str, differences: list[ScopeDifference]) -> str:
    """Why the policy of ConfigMap `name` is refused: the first ``DIFFERENCES_LIMIT`` of
    the `differences` between the scope it needs and the live configurations, a count of
    the others, and ``FIX``."""
    listed = [
        shorten(str(difference), DIFFERENCE_LENGTH)
        for difference in differences[:DIFFERENCES_LIMIT]
    ]
    if len(differences) > DIFFERENCES_LIMIT:
        listed.append(f"and {len(differences) - DIFFERENCES_LIMIT:,} more")
    return shorten(
        f"the policy in ConfigMap {name} needs webhook configurations other than the live "
        f"ones, which would not send its pods as it needs: {'; '.join(listed)}. "
        f"To change the policy, {FIX}",
        DENIAL_LIMIT,
    )


def _differences(
    kind: str, needed: Mapping[str, Mapping[str, Any]], live: Iterable[Mapping[str, Any]]
) -> Iterable[ScopeDifference]:
    installed = {str(hook.get("name")): hook for hook in live}
    for name, hook in needed.items():
        found = installed.get(name)
        if found is None:
            yield ScopeDifference(kind, name, f"not in the {kind}, the policy needs it")
            continue
        reasons = [
            *_rule_reasons(hook.get("rules", []), found.get("rules") or []),
            *_opt_in_reasons(hook.get("namespaceSelector"), found.get("namespaceSelector")),
            *_object_selector_reasons(hook.get("objectSelector"), found.get("objectSelector")),
            *_condition_reasons(hook.get("matchConditions", []), found.get("matchConditions")),
        ]
        if reasons:
            yield ScopeDifference(kind, name, "; ".join(reasons))
    for name in installed:
        if name not in needed:
            yield ScopeDifference(kind, name, f"in the {kind}, the policy has no such webhook")


def _rule_reasons(needed: Iterable[Mapping[str, Any]], live: Iterable[Any]) -> list[str]:
    want, have = _rule_set(needed), _rule_set(live)
    reasons = []
    if missing := want - have:
        reasons.append(f"its rules do not send {_rule_text(missing)}")
    if extra := have - want:
        reasons.append(f"its rules send {_rule_text(extra)}, which the policy does not need")
    return reasons


def _rule_set(rules: Iterable[Any]) -> set[tuple[str, str, str, str, str]]:
    """Each (operation, group, version, resource, scope) a list of rules sends."""
    found = set()
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        for operation in rule.get("operations") or ():
            for group in rule.get("apiGroups") or ():
                for version in rule.get("apiVersions") or ():
                    for resource in rule.get("resources") or ():
                        # kube-apiserver defaults an unset scope to "*".
                        scope = str(rule.get("scope") or "*")
                        found.add((operation, group, version, resource, scope))
    return found


def _rule_text(rules: set[tuple[str, str, str, str, str]]) -> str:
    by_resource: dict[str, list[str]] = {}
    for operation, group, version, resource, _ in sorted(rules):
        name = f"{resource}.{group}/{version}" if group else f"{resource}/{version}"
        if operation not in by_resource.setdefault(name, []):
            by_resource[name].append(operation)
    return ", ".join(f"{name} ({' '.join(ops)})" for name, ops in by_resource.items())


def _opt_in_reasons(needed: Any, live: Any) -> list[str]:
    want, have = _opt_in(needed), _opt_in(live)
    if want == have:
        return []
    return [
        f"its namespaceSelector opts namespaces in with {_terms(have)}, "
        f"the policy's opt-in label is {_terms(want)}"
    ]


def _opt_in(selector: Any) -> list[str]:
    """The terms of a namespaceSelector other than the namespaces named by name, which
    the operator may add to (the chart's excluded namespaces)."""
    if not isinstance(selector, Mapping):
        return []
    terms = [f"{key}={value}" for key, value in sorted((selector.get("matchLabels") or {}).items())]
    for expression in selector.get("matchExpressions") or ():
        if isinstance(expression, Mapping) and expression.get("key") != _NAMESPACE_NAME:
            terms.append(_expression_text(expression))
    return sorted(terms)


def _expression_text(expression: Mapping[str, Any]) -> str:
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    if operator == "In" and len(values) == 1:
        return f"{key}={values[0]}"
    if operator == "Exists":
        return str(key)
    if operator == "DoesNotExist":
        return f"!{key}"
    return f"{key} {operator} {','.join(map(str, values))}"


def _terms(terms: list[str]) -> str:
    return " and ".join(terms) if terms else "nothing (every namespace)"


def _object_selector_reasons(needed: Any, live: Any) -> list[str]:
    want, have = needed or {}, live or {}
    if want == have:
        return []
    wanted, had = _selected_keys(want), _selected_keys(have)
    if wanted and had and wanted != had:
        return [
            f"its objectSelector selects {', '.join(had)}, "
            f"the policy's workload label is {', '.join(wanted)}"
        ]
    return [
        f"its objectSelector is {json.dumps(have, sort_keys=True)}, "
        f"the policy needs {json.dumps(want, sort_keys=True)}"
    ]


def _selected_keys(selector: Mapping[str, Any]) -> list[str]:
    keys = list(selector.get("matchLabels") or {})
    keys += [
        str(expression.get("key"))
        for expression in selector.get("matchExpressions") or ()
        if isinstance(expression, Mapping)
    ]
    return sorted(keys)


def _condition_reasons(needed: Iterable[Mapping[str, Any]], live: Any) -> list[str]:
    want = {str(c["name"]): str(c["expression"]) for c in needed}
    have = {
        str(c.get("name")): str(c.get("expression")) for c in live or () if isinstance(c, Mapping)
    }
    reasons = []
    for name, expression in want.items():
        if name not in have:
            reasons.append(f"it lacks the matchCondition {name}")
        elif have[name] != expression:
            reasons.append(_condition_text(name, expression, have[name]))
    reasons.extend(
        f"its matchCondition {name} is not the policy's" for name in have if name not in want
    )
    return reasons


def _condition_text(name: str, needed: str, live: str) -> str:
    """What a matchCondition lacks or has beyond the policy's, by the names it quotes
    (labels, taint keys, resource prefixes, classes): the CEL around them is the renderer's."""
    want, have = set(_LITERAL.findall(needed)), set(_LITERAL.findall(live))
    parts = []
    if missing := sorted(want - have):
        parts.append(f"does not look for {', '.join(missing)}")
    if extra := sorted(have - want):
        parts.append(f"looks for {', '.join(extra)}, which the policy does not name")
    if not parts:
        parts.append("differs from the policy's")
    return f"its matchCondition {name} " + " and ".join(parts)
