"""The wing's one conflict strategy (webhook/kube/writes.py): read, write back on top of
what was read, and on a conflict start over from a fresh read.

The webhook configurations `install` applies go through it, against a fake
kube-apiserver that keeps resourceVersions as the real one does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.kube.fake_apiserver import FakeApiServer, serving
from webhook.kube.api_errors import ApiException
from webhook.kube.client import apply_webhook_configurations
from webhook.kube.writes import ATTEMPTS, retry_on_conflict

GROUP = "/apis/admissionregistration.k8s.io/v1"
MUTATING = f"{GROUP}/mutatingwebhookconfigurations/gpu-admission"
VALIDATING = f"{GROUP}/validatingwebhookconfigurations/gpu-admission"


def configuration(kind: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "gpu-admission", **metadata},
        "webhooks": [],
    }


MUTATING_BODY = configuration("MutatingWebhookConfiguration", labels={"new": "yes"})
VALIDATING_BODY = configuration("ValidatingWebhookConfiguration", labels={"new": "yes"})


@pytest.fixture
def fake() -> FakeApiServer:
    return FakeApiServer()


@pytest.fixture
def api(fake: FakeApiServer) -> Iterator[Any]:
    with serving(fake) as api:
        yield api


def writes(fake: FakeApiServer) -> list[str]:
    return [request for request in fake.requests if not request.startswith("GET")]


def test_missing_configurations_are_created(fake: FakeApiServer, api: Any) -> None:
    apply_webhook_configurations(api, MUTATING_BODY, VALIDATING_BODY)

    assert fake.objects[MUTATING]["metadata"]["labels"] == {"new": "yes"}
    assert fake.objects[VALIDATING]["metadata"]["labels"] == {"new": "yes"}
    assert writes(fake) == [
        f"POST {GROUP}/mutatingwebhookconfigurations",
        f"POST {GROUP}/validatingwebhookconfigurations",
    ]


def test_existing_configurations_are_replaced_whole_on_top_of_the_version_read(
    fake: FakeApiServer, api: Any
) -> None:
    fake.put(MUTATING, configuration("MutatingWebhookConfiguration", labels={"old": "yes"}))
    fake.put(VALIDATING, configuration("ValidatingWebhookConfiguration"))

    apply_webhook_configurations(api, MUTATING_BODY, VALIDATING_BODY)

    assert fake.objects[MUTATING]["metadata"]["labels"] == {"new": "yes"}
    assert writes(fake) == [f"PUT {MUTATING}", f"PUT {VALIDATING}"]


def test_a_write_that_loses_the_race_is_made_again_on_a_fresh_read(
    fake: FakeApiServer, api: Any
) -> None:
    fake.put(MUTATING, configuration("MutatingWebhookConfiguration"))
    fake.put(VALIDATING, configuration("ValidatingWebhookConfiguration"))
    fake.interlopers = 1

    apply_webhook_configurations(api, MUTATING_BODY, VALIDATING_BODY)

    assert fake.objects[MUTATING]["metadata"]["labels"] == {"new": "yes"}
    assert fake.requests[:4] == [f"GET {MUTATING}", f"PUT {MUTATING}"] * 2


def test_a_write_that_keeps_losing_gives_up_with_the_conflict(
    fake: FakeApiServer, api: Any
) -> None:
    fake.put(MUTATING, configuration("MutatingWebhookConfiguration"))
    fake.interlopers = ATTEMPTS

    with pytest.raises(ApiException) as raised:
        apply_webhook_configurations(api, MUTATING_BODY, VALIDATING_BODY)

    assert raised.value.status == 409
    assert writes(fake) == [f"PUT {MUTATING}"] * ATTEMPTS


def test_only_a_conflict_is_retried() -> None:
    calls: list[int] = []

    def forbidden() -> None:
        calls.append(1)
        raise ApiException(status=403, reason="Forbidden")

    with pytest.raises(ApiException):
        retry_on_conflict(forbidden)
    assert calls == [1]
