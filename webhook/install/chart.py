"""The generated parts of the Helm chart in deploy/helm/gpu-admission.

The chart must not drift from the kustomize tree, and its webhook configurations
must not be a hand-written copy of their CEL. So, like ``base/webhooks.yaml``, the
chart's ``templates/webhooks.yaml`` is written from
:func:`webhook.install.configurations.render_webhook_configurations`: the rendered
objects are kept as they are, except for the fields a value of the chart decides,
which become template expressions (helpers in ``templates/_helpers.tpl``):

- ``metadata``: the name, the chart's labels, and cert-manager's CA-injection
  annotation when the certificates come from cert-manager;
- ``clientConfig``: the Service in the release's namespace (or ``webhooks.url``)
  and, with self-generated certificates, the ``caBundle``;
- ``namespaceSelector``: the policy's opt-in label (``webhookScope.namespaceOptIn``;
  ``scope.namespaceLabel``, when set, must say the same), ``scope.matchExpressions``,
  the webhook's own ``webhooks.matchExpressions.<first label>`` and
  ``scope.excludedNamespaces``, the release's namespace always excluded, for every
  webhook whose selector is the opt-in scope; the release's namespace wherever else the
  service's own namespace appears;
- ``failurePolicy`` and ``timeoutSeconds``: a value per webhook, keyed by the
  first label of its name (``mutate``, ``validate-unclassed``, ...), the rendered
  value by default;
- what the policy decides of each webhook (``SCOPED_FIELDS``: its rules, its
  objectSelector, its CEL matchConditions): taken from the ``webhookScope`` value,
  which ``gpu-admission manifests helm-values --policy FILE`` prints beside the
  policy itself, or from ``files/webhook-scope.json``, the default policy's. Either
  holds the sha256 of the policy it was rendered from, and the chart refuses to render
  when the policy in force (``policy``, or ``files/policy.yaml``) is another: a policy
  of its own with another workload label, taint or resource can never be installed
  with webhooks that select the default one's pods. The policy ConfigMap's
  ``gpu-admission.io/webhook-scope`` annotation is the digest of these webhooks and the
  opt-in label (``gpu-admission.webhookScopeDigest``), the same as
  :func:`webhook.install.scope.scope_digest` of the policy: a Helm upgrade writes the
  ConfigMap before the configurations, and the policy ConfigMap's webhook admits it so.
  It is not ``policySha256``, the digest of the policy's text: an edit that leaves the
  scope as it was keeps the scope's digest.

Everything else is literal text. The default policy and
the alert rules are copied into ``files/``, which Helm reads without templating
(the alerts hold Prometheus' own ``{{ }}`` templates).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import yaml

from webhook.install.configurations import (
    Endpoint,
    namespace_selector,
    render_webhook_configurations,
)
from webhook.install.flow_control import tenant_write_rules
from webhook.install.names import APP_LABELS, SERVICE, WEBHOOK_CONFIGURATION
from webhook.install.priority_classes import priority_class_specs
from webhook.install.scope import SCOPED_FIELDS
from webhook.policy import Policy

CHART = Path("helm/gpu-admission")
"""The chart's directory, relative to deploy/."""

_PLACEHOLDER = re.compile(r"'?@@(\d+)@@'?")

_SCOPED = "x-gpu-admission-scope"
"""A key put, with the webhook's name, where its scoped fields go while it is dumped:
its line becomes the template action that writes them."""

_SCOPED_LINE = re.compile(rf"^( *){_SCOPED}: ([a-z0-9.-]+)$", re.MULTILINE)

RELEASE_NAMESPACE = "release-namespace-of-the-chart"
"""What the configurations are rendered with as their own namespace: wherever it is left
in literal text (a selector or CEL of a webhook that the scope values do not decide),
the chart's namespace (``namespaceOverride``, else the release's) is put in its place."""


class _Template:
    """Template expressions put in place of values: each value is a placeholder
    while the object is dumped as YAML, then replaced by its expression."""

    def __init__(self) -> None:
        self.expressions: list[str] = []

    def expression(self, text: str) -> str:
        self.expressions.append(text)
        return f"@@{len(self.expressions) - 1}@@"

    def fill(self, dumped: str) -> str:
        literal = _PLACEHOLDER.sub("", dumped)
        if "{{" in literal or "}}" in literal:
            # Helm would evaluate it: a rendered CEL expression must never hold braces
            # that read as a template action.
            raise ValueError("rendered webhook configurations hold '{{' or '}}'")
        filled = _PLACEHOLDER.sub(lambda m: self.expressions[int(m.group(1))], dumped)
        return filled.replace(RELEASE_NAMESPACE, '{{ include "gpu-admission.namespace" $ }}')


def short_name(webhook: str) -> str:
    """The key of a webhook in the chart's per-webhook values: its name's first label."""
    return webhook.split(".", 1)[0]


def _templated_hook(
    hook: dict[str, Any], scope: dict[str, Any], template: _Template
) -> dict[str, Any]:
    key = short_name(hook["name"])
    path = hook["clientConfig"]["service"]["path"]
    templated = dict(hook)
    templated["clientConfig"] = template.expression(
        f'{{{{ include "gpu-admission.clientConfig" (list . {json.dumps(path)}) }}}}'
    )
    # The scope values decide the selector of the webhooks that act in opted-in
    # namespaces; any other selector is kept as rendered.
    if hook.get("namespaceSelector") == scope:
        templated["namespaceSelector"] = template.expression(
            f'{{{{ include "gpu-admission.namespaceSelector" (list . {json.dumps(key)}) }}}}'
        )
    templated["failurePolicy"] = template.expression(
        f'{{{{ include "gpu-admission.failurePolicy" '
        f"(list . {json.dumps(key)} {json.dumps(hook['failurePolicy'])}) }}}}"
    )
    templated["timeoutSeconds"] = template.expression(
        f'{{{{ include "gpu-admission.timeoutSeconds" '
        f"(list . {json.dumps(key)} {hook['timeoutSeconds']}) }}}}"
    )
    for field in SCOPED_FIELDS:
        templated.pop(field, None)
    templated[_SCOPED] = hook["name"]
    return templated


def webhook_scope(policy: Policy, policy_text: str) -> dict[str, Any]:
    """What `policy` decides of the install: each webhook's ``SCOPED_FIELDS`` by webhook
        name, the namespace opt-in label every opted-in webhook selects, and the PriorityClasses
        its classes name (``priority_class_specs``), the tenant writes its flow control shapes
    (``tenant_write_rules``), with the sha256 of `policy_text` (the
        exact text the chart is given as its policy)."""
    endpoint = Endpoint(ca_bundle="", service_name=SERVICE, service_namespace=RELEASE_NAMESPACE)
    configurations = render_webhook_configurations(
        policy, endpoint, own_namespace=RELEASE_NAMESPACE
    )
    webhooks = {
        hook["name"]: {field: hook[field] for field in SCOPED_FIELDS if field in hook}
        for configuration in configurations
        for hook in configuration["webhooks"]
    }
    if RELEASE_NAMESPACE in json.dumps(webhooks):
        raise ValueError("a scoped field of a webhook names the service's own namespace")
    key, value = policy.namespace_opt_in
    return {
        "policySha256": hashlib.sha256(policy_text.encode("utf-8")).hexdigest(),
        "namespaceOptIn": {"key": key, "value": value},
        "priorityClasses": priority_class_specs(policy),
        "tenantWriteRules": tenant_write_rules(policy),
        "webhooks": webhooks,
    }


def helm_values(policy: Policy, policy_text: str) -> str:
    """The values that install the chart with `policy`: the policy and its webhooks'
    scope, as a YAML file for ``helm install -f``."""
    values = {"policy": policy_text, "webhookScope": webhook_scope(policy, policy_text)}
    return yaml.dump(values, Dumper=_LiteralDumper, sort_keys=False, width=100)


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (the policy) as literal blocks, readable and exact."""


def _literal(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_LiteralDumper.add_representer(str, _literal)


_WEBHOOK_METADATA = '{{ include "gpu-admission.webhookMetadata" . }}'


def webhooks_template(policy: Policy, header: str) -> str:
    """templates/webhooks.yaml: both configurations, values put in as described above."""
    endpoint = Endpoint(ca_bundle="", service_name=SERVICE, service_namespace=RELEASE_NAMESPACE)
    configurations = render_webhook_configurations(
        policy, endpoint, own_namespace=RELEASE_NAMESPACE
    )
    scope = namespace_selector(policy, RELEASE_NAMESPACE)
    keys = [short_name(h["name"]) for c in configurations for h in c["webhooks"]]
    if len(set(keys)) != len(keys):
        raise ValueError(f"two webhooks share a first label: {keys}")
    opted_in = [
        short_name(h["name"])
        for c in configurations
        for h in c["webhooks"]
        if h.get("namespaceSelector") == scope
    ]
    template = _Template()
    documents = []
    for configuration in configurations:
        templated = dict(configuration)
        # The chart names both configurations by its fullname (WEBHOOK_CONFIGURATION
        # unless fullnameOverride).
        if configuration["metadata"] != {"name": WEBHOOK_CONFIGURATION, "labels": dict(APP_LABELS)}:
            raise ValueError(f"metadata the chart does not template: {configuration['metadata']}")
        templated["metadata"] = template.expression(
            '{{ include "gpu-admission.webhookMetadata" . }}'
        )
        templated["webhooks"] = [
            _templated_hook(h, scope, template) for h in configuration["webhooks"]
        ]
        documents.append(templated)
    dumped = yaml.safe_dump_all(
        documents, sort_keys=False, default_flow_style=False, explicit_start=True, width=100
    )
    # A value for a webhook that does not exist is a typo: refused rather than ignored.
    check = (
        '{{- include "gpu-admission.checkWebhookKeys" '
        f"(list . (list {' '.join(json.dumps(k) for k in keys)}) "
        f"(list {' '.join(json.dumps(k) for k in opted_in)})) }}}}\n"
    )
    # The policy in force and the scope of its webhooks go together.
    check += '{{- include "gpu-admission.checkWebhookScope" . }}\n'
    return header + check + _scoped_lines(template.fill(dumped))


def _scoped_lines(filled: str) -> str:
    """Each webhook's line of its scoped fields, as the action that writes them indented
    as the line was (``nindent``, the line's own indentation trimmed by ``{{-``)."""

    def action(match: re.Match[str]) -> str:
        indent, name = match.group(1), match.group(2)
        return (
            f'{indent}{{{{- include "gpu-admission.scopedFields" (list . {json.dumps(name)})'
            f" | nindent {len(indent)} }}}}"
        )

    found = _SCOPED_LINE.sub(action, filled)
    if _SCOPED in found:
        raise ValueError("a webhook's scoped fields were left unplaced")
    return found


def alerts_rules(alerts_text: str) -> str:
    """files/prometheus-rules.yaml: the ``spec`` of deploy/monitoring/alerts.yaml, comments
    kept, for the chart's PrometheusRule to read with ``.Files.Get`` (never templated)."""
    lines = alerts_text.splitlines(keepends=True)
    try:
        start = lines.index("spec:\n") + 1
    except ValueError:
        raise ValueError("deploy/monitoring/alerts.yaml has no top-level 'spec:'") from None
    body = lines[start:]
    if not all(line.startswith("  ") or not line.strip() for line in body):
        raise ValueError("deploy/monitoring/alerts.yaml has a top-level key after 'spec:'")
    return "".join(line[2:] if line.strip() else "\n" for line in body)
