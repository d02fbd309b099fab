"""webhook/install/chart.py: how the chart's webhooks template is written from the renderer.

What the template renders to is proven by helm itself in test_helm.py; these tests cover
the generator's own rules, without helm.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.handlers import HANDLERS
from webhook.engine.handlers.declaration import OPTED_IN
from webhook.install import chart
from webhook.install.chart import RELEASE_NAMESPACE, alerts_rules, short_name, webhooks_template
from webhook.policy import load_default_policy


def with_extra_hook(hook: dict[str, Any]) -> Any:
    """The real renderer, with `hook` added to the validating configuration."""
    real = chart.render_webhook_configurations

    def render(*args: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        mutating, validating = real(*args, **kwargs)
        validating["webhooks"].append(
            hook | {"clientConfig": validating["webhooks"][0]["clientConfig"]}
        )
        return mutating, validating

    return render


def policy_hook(**fields: Any) -> dict[str, Any]:
    return {
        "name": "validate-extra.gpu-admission.io",
        "rules": [],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
        **fields,
    }


def test_every_webhook_is_keyed_by_the_first_label_of_its_name() -> None:
    assert short_name("validate-unclassed.gpu-admission.io") == "validate-unclassed"


def test_the_scope_values_decide_only_the_selectors_that_are_the_opt_in_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own = {
        "matchLabels": {"kubernetes.io/metadata.name": RELEASE_NAMESPACE},
    }
    monkeypatch.setattr(
        chart, "render_webhook_configurations", with_extra_hook(policy_hook(namespaceSelector=own))
    )

    text = webhooks_template(load_default_policy(), "")

    assert 'kubernetes.io/metadata.name: {{ include "gpu-admission.namespace" $ }}\n' in text
    assert RELEASE_NAMESPACE not in text
    opted_in = [h for h in HANDLERS if h.namespaces == OPTED_IN and not h.retired]
    assert text.count('include "gpu-admission.namespaceSelector"') == len(opted_in)
    assert '(list . "validate-extra" 5)' in text


def test_cel_is_data_of_the_scope_never_text_helm_would_evaluate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    condition = {"name": "braces", "expression": "'{{' != '}}'"}
    monkeypatch.setattr(
        chart,
        "render_webhook_configurations",
        with_extra_hook(policy_hook(matchConditions=[condition])),
    )

    text = webhooks_template(load_default_policy(), "")
    scope = chart.webhook_scope(load_default_policy(), "policy text")

    assert "'{{' != '}}'" not in text
    assert scope["webhooks"]["validate-extra.gpu-admission.io"]["matchConditions"] == [condition]


def test_braces_in_other_rendered_text_are_refused_since_helm_would_evaluate_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        chart,
        "render_webhook_configurations",
        with_extra_hook(policy_hook(sideEffects="{{ None }}")),
    )

    with pytest.raises(ValueError, match="hold"):
        webhooks_template(load_default_policy(), "")


def test_two_webhooks_with_one_first_label_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        chart,
        "render_webhook_configurations",
        with_extra_hook(policy_hook(name="validate.other.example")),
    )

    with pytest.raises(ValueError, match="share a first label"):
        webhooks_template(load_default_policy(), "")


def test_the_alert_rules_are_the_spec_of_the_prometheus_rule_comments_kept() -> None:
    text = "kind: PrometheusRule\nspec:\n  groups:\n    # why\n    - name: x\n\n"

    assert alerts_rules(text) == "groups:\n  # why\n  - name: x\n\n"


def test_alert_rules_without_a_spec_are_refused() -> None:
    with pytest.raises(ValueError, match="no top-level 'spec:'"):
        alerts_rules("kind: PrometheusRule\n")
