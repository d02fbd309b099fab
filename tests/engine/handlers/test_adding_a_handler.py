"""Adding a webhook is one declaration and one judge (CONTRIBUTING.md): a handler of
Leases, declared here and nowhere else, is found in the webhook configurations, at a
route of its own, in the metrics' labels and in the live scope check."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import admission_review
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.decision import Violation, allow, judge, subject
from webhook.engine.handlers import HANDLERS, Handler, HandlerRegistry, ResourceRule, Review
from webhook.engine.handlers.declaration import IGNORE, Condition, static
from webhook.engine.rules.claims import RULE
from webhook.http.app import create_app
from webhook.http.metrics_app import create_metrics_app
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.scope import scope_differences
from webhook.policy import Policy, load_default_policy

RESERVED = "gpu-admission-reserved"


def refuse_reserved_leases(engine: Engine, review: Review) -> Decision:
    request = review.request
    if request.name != RESERVED:
        return allow()
    named = subject("Lease", request.namespace, request.name)
    return judge([Violation(RULE, "the name is reserved")], named)


def reserved_name(policy: Policy) -> str:
    return f"object.metadata.name == '{RESERVED}'"


def names_reserved(policy: Policy, request: AdmissionRequest) -> bool:
    """The condition's Python twin."""
    return bool(request.object.get("metadata", {}).get("name") == RESERVED)


LEASES = Handler(
    "validate-leases",
    mutating=False,
    rules=static(
        ResourceRule(
            "coordination.k8s.io", ("v1",), ("leases",), {"CREATE": refuse_reserved_leases}
        )
    ),
    summary="Refuses a Lease of a reserved name.",
    conditions=(Condition("reserved-name", reserved_name, names_reserved),),
    failure_policy=IGNORE,
)


@pytest.fixture(scope="module")
def registry() -> HandlerRegistry:
    return HANDLERS.with_handler(LEASES)


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_default_policy()


def lease_review(name: str) -> dict[str, Any]:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}}
    return admission_review(
        lease, kind="Lease", group="coordination.k8s.io", resource="leases", name=name
    )


def test_the_new_handler_is_a_webhook_of_the_validating_configuration_at_its_own_path(
    registry: HandlerRegistry, policy: Policy
) -> None:
    endpoint = Endpoint("Q0E=", url="https://127.0.0.1:8443")
    mutating, validating = render_webhook_configurations(policy, endpoint, handlers=registry)

    assert [h["name"] for h in mutating["webhooks"]] == [
        h.webhook_name for h in HANDLERS.mutating()
    ]
    *before, hook = validating["webhooks"]
    assert [h["name"] for h in before] == [h.webhook_name for h in HANDLERS.validating()]
    assert hook["name"] == "validate-leases.gpu-admission.io"
    assert hook["clientConfig"]["url"] == "https://127.0.0.1:8443/validate-leases"
    assert hook["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": ["coordination.k8s.io"],
            "apiVersions": ["v1"],
            "resources": ["leases"],
            "scope": "Namespaced",
        }
    ]
    assert hook["matchConditions"] == [
        {"name": "reserved-name", "expression": f"object.metadata.name == '{RESERVED}'"}
    ]
    assert hook["failurePolicy"] == "Ignore"
    assert "objectSelector" not in hook


def test_the_new_handler_judges_at_its_route_and_is_counted_under_its_name(
    registry: HandlerRegistry, policy: Policy
) -> None:
    engine = Engine(policy, handlers=registry)
    client = TestClient(create_app(lambda: engine, handlers=registry))

    refused = client.post("/validate-leases", json=lease_review(RESERVED)).json()["response"]
    admitted = client.post("/validate-leases", json=lease_review("other")).json()["response"]

    assert refused["allowed"] is False
    assert "Lease 'ml/gpu-admission-reserved'" in refused["status"]["message"]
    assert admitted["allowed"] is True
    scraped = TestClient(create_metrics_app(client.app.state.metrics)).get("/metrics").text
    counted = {
        (sample.labels["webhook"], sample.labels["decision"])
        for family in text_string_to_metric_families(scraped)
        for sample in family.samples
        if sample.name == "gpu_admission_requests_total"
    }
    assert counted == {("validate-leases", "denied"), ("validate-leases", "allowed")}


def test_without_the_handler_there_is_no_route_for_it(policy: Policy) -> None:
    client = TestClient(create_app(lambda: Engine(policy)))

    assert client.post("/validate-leases", json=lease_review(RESERVED)).status_code == 404


def test_the_live_scope_check_finds_the_new_webhook_missing_from_configurations_without_it(
    registry: HandlerRegistry, policy: Policy
) -> None:
    endpoint = Endpoint("Q0E=", url="https://127.0.0.1:8443")
    live = render_webhook_configurations(policy, endpoint)
    needed = render_webhook_configurations(policy, endpoint, handlers=registry)

    assert scope_differences(policy, *live) == []
    missing = scope_differences(policy, *live, handlers=registry)
    assert [(d.webhook, d.reason) for d in missing] == [
        (
            "validate-leases.gpu-admission.io",
            "not in the ValidatingWebhookConfiguration, the policy needs it",
        )
    ]
    assert scope_differences(policy, *needed, handlers=registry) == []
