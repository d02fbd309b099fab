"""Hostile admission reviews against the engine and the HTTP edge (see tests/fuzz/strategies.py
for the inputs and tests/fuzz/invariants.py for what must hold).

Each generated review goes to `Engine.mutate` and `Engine.validate` directly (with
no inventory, or a live one of a few nodes) and then, as the bytes kube-apiserver
would send, to `/mutate` and `/validate` of the FastAPI app through its in-process
transport. The normal suite runs a short version; `make fuzz` sets
GPU_ADMISSION_FUZZ_EXAMPLES to 100,000 and fails on any reply over one second.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.invariants import TALLY, check_decision, check_reply, examples
from tests.fuzz.strategies import FUZZ_POLICY, Drawn, encode, reviews
from webhook.engine import Engine
from webhook.engine.inventory import UNKNOWN, Inventory, NodeFacts, PriorityClassFacts
from webhook.http.app import create_app
from webhook.http.review import InvalidReview, parse_review, to_engine_request
from webhook.policy.load import default_policy_text, load_policy_text

Json = Any

ENGINE = Engine(load_policy_text(default_policy_text() + FUZZ_POLICY, "default policy + fuzz"))
LIVE = Inventory(
    nodes=(
        NodeFacts("a100-0", {"gpu-pool": "inference", "nvidia-gpu-model": "A100"}, True,
                  {"nvidia.com/gpu": Decimal(4), "nvidia.com/mig-1g.5gb": Decimal(14)}),
        NodeFacts("v100-0", {"gpu-pool": "training", "nvidia-gpu-model": "V100"}, True,
                  {"nvidia.com/gpu": Decimal(8)}),
        NodeFacts("cordoned", {"gpu-pool": "training"}, False, {"nvidia.com/gpu": Decimal(8)}),
        NodeFacts("cpu-0", {}, True, {}),
    ),
    priority_classes={
        "inference-priority": PriorityClassFacts("inference-priority", 1_000_000, None),
        "training-priority": PriorityClassFacts("training-priority", 1_000, "Never"),
    },
)  # fmt: skip
"""A small cluster: a node per pool, a cordoned one and a CPU node; the classes' priorities."""

FUZZ = settings(
    max_examples=examples(2_000),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)


class Client:
    """The app through httpx's in-process ASGI transport, on one event loop kept for the
    module: a reply costs what the app does, not a thread hand-over per request."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=create_app(lambda: ENGINE))
        self.client = httpx.AsyncClient(transport=transport, base_url="http://fuzz")

    def post(self, webhook: str, body: bytes) -> httpx.Response:
        headers = {"content-type": "application/json"}
        return self.loop.run_until_complete(
            self.client.post(f"/{webhook}", content=body, headers=headers)
        )

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    app_client = Client()
    yield app_client
    app_client.close()


@FUZZ
@given(drawn=reviews(), inventory=st.sampled_from([UNKNOWN, LIVE]))
def test_no_review_makes_the_engine_or_the_edge_fail(
    client: Client, drawn: Drawn, inventory: Inventory
) -> None:
    body, scaled = drawn.body, drawn.scaled
    TALLY.inputs[_kind(drawn.review)] += 1
    TALLY.body(len(body))
    try:
        parsed = parse_review(body)
    except InvalidReview:
        parsed = None
    if parsed is not None:
        request = to_engine_request(parsed)
        for webhook, judge in (
            ("mutate", lambda: ENGINE.mutate(request, inventory)),
            ("validate", lambda: ENGINE.validate(request, inventory, scaled)),
        ):
            check_decision(TALLY.timed(f"engine {webhook}", judge), request.object, webhook)
    uid = parsed.request.uid if parsed is not None else None
    for webhook in ("mutate", "validate"):
        reply = TALLY.timed(f"HTTP /{webhook}", functools.partial(client.post, webhook, body))
        check_reply(reply.status_code, reply.content, uid, _object(parsed), webhook)


@settings(FUZZ, max_examples=max(100, FUZZ.max_examples // 20))
@given(
    body=st.binary(max_size=2_000)
    | st.text(max_size=200).map(str.encode)
    | st.sampled_from([b"", b"null", b"[]", b"{}", b'{"request": {"uid": "u"}}', b"\xff\xfe"])
)
def test_no_body_that_is_not_a_review_makes_the_edge_fail(client: Client, body: bytes) -> None:
    TALLY.inputs["not a review"] += 1
    for webhook in ("mutate", "validate"):
        reply = TALLY.timed(f"HTTP /{webhook}", functools.partial(client.post, webhook, body))
        check_reply(reply.status_code, reply.content, _uid_if_review(body), None, webhook)


def _object(parsed: Any) -> Json:
    return parsed.request.object if parsed is not None else None


def _uid_if_review(body: bytes) -> str | None:
    try:
        return parse_review(body).request.uid
    except InvalidReview:
        return None


def _kind(review: Json) -> str:
    request = review.get("request") if isinstance(review, dict) else None
    kind = request.get("kind") if isinstance(request, dict) else None
    name = kind.get("kind") if isinstance(kind, dict) else None
    return name if isinstance(name, str) else "broken envelope"


def test_the_encoder_writes_what_orjson_cannot() -> None:
    deep: Json = "x"
    for _ in range(2_000):
        deep = [deep]
    assert encode(deep) == b"[" * 2_000 + b'"x"' + b"]" * 2_000
    assert encode({"a": [1, 2**70, None]}) == b'{"a":[1,1180591620717411303424,null]}'
