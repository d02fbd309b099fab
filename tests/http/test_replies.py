"""The HTTP responses of the admission app (webhook/http/replies.py)."""

from __future__ import annotations

import pytest

from webhook.http.judging import Judged, encode, refused
from webhook.http.replies import json_reply, review_reply


def test_a_review_reply_carries_the_encoded_reply_and_its_status_as_json() -> None:
    reply = review_reply(Judged(200, b'{"response": {}}'))

    assert (reply.status_code, reply.body) == (200, b'{"response": {}}')
    assert reply.headers["content-type"] == "application/json"
    assert "connection" not in reply.headers


@pytest.mark.parametrize("status", [200, 400])
def test_an_answered_or_unreadable_review_keeps_its_connection(status: int) -> None:
    assert "connection" not in review_reply(Judged(status, encode({}))).headers


def test_a_body_too_large_closes_its_connection() -> None:
    reply = review_reply(refused(413, "too large"))

    assert reply.headers["connection"] == "close"
    assert "retry-after" not in reply.headers


def test_a_review_there_is_no_room_for_closes_its_connection_and_says_when_to_retry() -> None:
    reply = review_reply(refused(503, "busy"))

    assert (reply.headers["connection"], reply.headers["retry-after"]) == ("close", "1")


def test_a_probe_reply_is_its_content_as_json() -> None:
    reply = json_reply({"ready": False}, 503)

    assert (reply.status_code, reply.body) == (503, b'{"ready":false}')
    assert reply.headers["content-type"] == "application/json"
