"""`webhook.http.judging`: a reply over the cap is an error review saying so, not a huge
body for kube-apiserver to read."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.testclient import TestClient

from tests.conftest import Review
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.dra.pod_claims import NO_CLAIMS
from webhook.engine.handlers import Review as HandlerReview
from webhook.engine.inventory import UNKNOWN
from webhook.http.app import create_app
from webhook.http.judging import MAX_REPLY_BYTES, Asked, Judged, ToRead, judge_body, judged, refused
from webhook.http.review import read_request


class PatchingEngine(Engine):
    """An engine whose mutation writes a patch larger than any rule would."""

    def answer(self, handler: str, review: HandlerReview) -> Decision:
        if not self.handlers.named(handler).mutating:
            return super().answer(handler, review)
        value = "x" * 1024
        patch = tuple(
            {"op": "add", "path": f"/metadata/annotations/a{n}", "value": value}
            for n in range(MAX_REPLY_BYTES // 1024)
        )
        return Decision(allowed=True, patch=patch)


def request_of(review: Review) -> AdmissionRequest:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}
    return read_request(orjson.dumps(review(pod, uid="huge")))


def test_a_reply_over_the_cap_becomes_an_error_review_saying_so(review: Review) -> None:
    request = request_of(review)
    patch = ({"op": "add", "path": "/metadata/annotations/a", "value": "x" * MAX_REPLY_BYTES},)

    answered = judged(request, Decision(allowed=True, patch=patch))

    response = orjson.loads(answered.reply)["response"]
    assert len(answered.reply) < 1024
    assert response["uid"] == "huge"
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert f"over its cap of {MAX_REPLY_BYTES:,}" in response["status"]["message"]
    assert "patch" not in response


def test_a_reply_within_the_cap_carries_its_patch(review: Review) -> None:
    patch = ({"op": "add", "path": "/metadata/annotations/a", "value": "x" * 1000},)

    response = orjson.loads(judged(request_of(review), Decision(True, patch=patch)).reply)

    assert response["response"]["allowed"] is True
    assert "patch" in response["response"]


def test_the_route_sends_the_error_review_and_logs_why(policy: Any, review: Review) -> None:
    client = TestClient(create_app(lambda: PatchingEngine(policy)))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}

    reply = client.post("/mutate", content=orjson.dumps(review(pod, uid="route")))

    assert reply.status_code == 200
    assert len(reply.content) < 1024
    assert reply.json()["response"]["status"]["code"] == 500


def test_a_review_whose_pods_name_claims_comes_back_saying_what_to_read_first(
    engine: Engine, review: Review
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "labels": {"gpu-admission.io/workload": "training"},
        },
        "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
    }
    body = orjson.dumps(review(pod, uid="u-claims", name="p"))

    first = judge_body("validate", engine, body, UNKNOWN)
    then = judge_body("validate", engine, body, UNKNOWN, claims=NO_CLAIMS)

    assert isinstance(first, ToRead)
    assert first.asked == Asked("u-claims", "CREATE", "ml", "p")
    assert [source.name for source in first.sources] == ["one-gpu"]
    assert isinstance(then, Judged)
    assert then.asked == first.asked


def test_a_request_the_service_does_not_judge_is_refused_with_its_status_and_why() -> None:
    answered = refused(503, "no room now", "u-9")

    assert (answered.status, orjson.loads(answered.reply)) == (503, {"error": "no room now"})
    assert answered.asked == Asked("u-9")
    assert answered.decision is None


def test_a_body_that_is_not_a_review_is_answered_400_saying_why(engine: Engine) -> None:
    answered = judge_body("validate", engine, b"{}", UNKNOWN)

    assert isinstance(answered, Judged)
    assert answered.status == 400
    assert orjson.loads(answered.reply) == {"error": answered.reason}
    assert "not an AdmissionReview" in answered.reason
