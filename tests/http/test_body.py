"""The large-body budget of `webhook.http.body` on a real server: kube-apiserver's large
reviews get through while other sources hold uploads that stall."""

from __future__ import annotations

import asyncio
import json

from fastapi import FastAPI

from tests.conftest import admission_review
from tests.http.live import exchange, live, post, reply, run
from webhook.engine import Engine
from webhook.http.app import INLINE_BODY_BYTES, create_app

STALLED = 0.3
"""The stall after which a body gives way, in these tests."""


def large_review(uid: str = "large") -> bytes:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "annotations": {"pad": "x" * 100_000}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    body = json.dumps(admission_review(pod, uid=uid)).encode()
    assert len(body) > INLINE_BODY_BYTES
    return body


SIZE = len(large_review())


def app_with_budget(engine: Engine, budget: int, per_source: int) -> FastAPI:
    app = create_app(lambda: engine, body_budget_bytes=budget, body_share_per_source=per_source)
    app.state.body_budget.stalled_seconds = STALLED
    return app


def test_uploads_that_stall_give_way_to_a_large_review_that_arrives_whole(
    engine: Engine,
) -> None:
    async def scenario() -> None:
        app = app_with_budget(engine, budget=3 * SIZE, per_source=SIZE)
        async with live(app) as server:
            stalled = []
            for source in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
                streams = await server.connect(source)
                streams[1].write(post("/validate", b" " * (SIZE - 1), declared=SIZE))
                stalled.append(streams)
            await asyncio.sleep(STALLED + 0.2)
            assert app.state.body_budget.held == 3 * SIZE

            status, body = await exchange(await server.connect(), post("/validate", large_review()))

            assert status == 200, body
            assert json.loads(body)["response"]["uid"] == "large"
            assert (await reply(stalled[0][0]))[0] == 408
            for _, writer in stalled:
                writer.close()

    run(scenario)


def test_one_source_holds_at_most_its_share_and_is_told_so_at_once(engine: Engine) -> None:
    async def scenario() -> None:
        app = app_with_budget(engine, budget=4 * SIZE, per_source=SIZE)
        async with live(app) as server:
            held = await server.connect("127.0.0.2")
            held[1].write(post("/validate", b" " * 100, declared=SIZE))
            await asyncio.sleep(0.1)

            status, body = await exchange(
                await server.connect("127.0.0.2"), post("/validate", large_review())
            )
            assert status == 503
            assert b"from this address" in body

            status, _ = await exchange(await server.connect(), post("/validate", large_review()))
            assert status == 200
            held[1].close()

    run(scenario)


def test_a_body_that_arrives_whole_is_never_cut_off_for_another(engine: Engine) -> None:
    async def scenario() -> None:
        app = app_with_budget(engine, budget=SIZE, per_source=SIZE)
        app.state.body_budget.stalled_seconds = 0.0
        async with live(app) as server:
            first = await exchange(await server.connect(), post("/validate", large_review("a")))
            second = await exchange(
                await server.connect("127.0.0.2"), post("/validate", large_review("b"))
            )

            assert (first[0], second[0]) == (200, 200)
            assert app.state.body_budget.held == 0

    run(scenario)
