"""Large bodies are judged in the review worker's process, with the same answers as on
the event loop, and the edge stays up when the engine there fails or the worker dies."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import types
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from tests.builders import container, mutated, pod
from tests.conftest import Review
from webhook.engine import Decision, Engine
from webhook.engine.handlers import Review as HandlerReview
from webhook.engine.inventory import Inventory, NodeFacts, Taint
from webhook.http.app import INLINE_BODY_BYTES, create_app
from webhook.http.metrics import Metrics
from webhook.http.offload import ReviewWorker
from webhook.policy import Policy


class FailingEngine(Engine):
    """An engine whose validation raises, as a bug in a rule would (in the worker too:
    the class is found there by its module's name)."""

    def answer(self, handler: str, review: HandlerReview) -> Decision:
        raise RuntimeError("rule crashed on purpose")


class DyingEngine(Engine):
    """An engine that takes the whole worker process down, as the OOM killer would."""

    def answer(self, handler: str, review: HandlerReview) -> Decision:
        os._exit(9)


class StuckEngine(Engine):
    """An engine that never returns, as a rule caught in an endless loop would."""

    def answer(self, handler: str, review: HandlerReview) -> Decision:
        time.sleep(3600)
        raise AssertionError("unreachable")


def large(review: Review, uid: str, gpus: int = 1) -> bytes:
    """A review of a pod whose annotation makes the body larger than what is judged inline."""
    sent = pod("inference", containers=[container(gpus=gpus)])
    sent["metadata"]["annotations"] = {"padding": "x" * INLINE_BODY_BYTES}
    body = orjson.dumps(review(sent, uid=uid))
    assert len(body) > INLINE_BODY_BYTES
    return body


def response_of(reply: Any) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text
    response: dict[str, Any] = reply.json()["response"]
    return response


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_a_large_body_gets_from_the_worker_the_answer_the_event_loop_gives(
    engine: Engine, worker: ReviewWorker, review: Review, endpoint: str
) -> None:
    body = large(review, uid="large-1")
    on_the_loop = TestClient(create_app(lambda: engine))
    in_the_worker = TestClient(create_app(lambda: engine, worker=worker))

    expected = response_of(on_the_loop.post(endpoint, content=body))
    answered = response_of(in_the_worker.post(endpoint, content=body))

    assert answered == expected
    assert answered["uid"] == "large-1"


def gpu_node(name: str, pool: str, gpus: int) -> NodeFacts:
    taints = (Taint("gpu-pool", pool, "NoSchedule"),)
    labels = {"gpu-pool": pool, "nvidia-gpu-model": "A100"}
    return NodeFacts(name, labels, True, {"nvidia.com/gpu": Decimal(gpus)}, taints)


def test_the_worker_judges_against_each_new_inventory_sent_as_what_changed(
    engine: Engine, review: Review
) -> None:
    """The inventory changes under the worker: a node of the pool loses its GPUs, then
    gets them back, then a node joins; each large review is answered as on the loop."""
    nodes = tuple(gpu_node(f"inference-{i}", "inference", 8) for i in range(4))
    drained = (*nodes[:3], gpu_node("inference-3", "inference", 0))
    emptied = tuple(gpu_node(node.name, "inference", 0) for node in nodes)
    inventories = [
        Inventory(nodes=nodes),
        Inventory(nodes=emptied),  # most nodes changed: sent whole
        Inventory(nodes=(*emptied[:3], nodes[3])),  # one node changed: sent as a patch
        Inventory(nodes=drained),
        Inventory(nodes=(*nodes, gpu_node("inference-4", "inference", 8))),  # a node joined
    ]
    now = [inventories[0]]
    placed = mutated(engine, pod("inference", containers=[container(gpus=1)]), inventories[0])
    placed["metadata"]["annotations"] = {"padding": "x" * INLINE_BODY_BYTES}
    body = orjson.dumps(review(placed, uid="large-changing"))
    worker = ReviewWorker()
    try:
        in_the_worker = TestClient(create_app(lambda: engine, worker=worker, inventory=lambda: now[0]))  # fmt: skip
        on_the_loop = TestClient(create_app(lambda: engine, inventory=lambda: now[0]))
        answers = []
        for inventory in inventories:
            now[0] = inventory
            expected = response_of(on_the_loop.post("/validate", content=body))
            assert response_of(in_the_worker.post("/validate", content=body)) == expected
            answers.append(expected["allowed"])
    finally:
        worker.stop()

    assert answers == [True, False, True, True, True]  # the inventories made a difference


def test_a_large_body_that_is_not_a_review_gets_400_from_the_worker(
    engine: Engine, worker: ReviewWorker
) -> None:
    client = TestClient(create_app(lambda: engine, worker=worker))

    reply = client.post("/validate", content=b"[" + b" " * INLINE_BODY_BYTES + b"]")

    assert reply.status_code == 400
    assert reply.json() == {"error": "body is not a JSON object"}


def test_what_cannot_be_handed_to_the_worker_is_answered_500_with_the_uid_and_logged(
    engine: Engine, worker: ReviewWorker, review: Review, caplog: pytest.LogCaptureFixture
) -> None:
    """An inventory that does not pickle (as the live inventory's once did) costs the
    review an internal error kube-apiserver reads, not the ASGI server's bare 500."""
    unpicklable = Inventory(nodes=(), priority_classes=types.MappingProxyType({}))
    client = TestClient(create_app(lambda: engine, worker=worker, inventory=lambda: unpicklable))

    response = response_of(client.post("/validate", content=large(review, uid="no-pickle")))

    assert (response["uid"], response["allowed"], response["status"]["code"]) == (
        "no-pickle",
        False,
        500,
    )
    assert "the review could not be judged in the worker" in caplog.text


def test_an_engine_failing_in_the_worker_is_answered_500_with_the_uid_and_logged(
    policy: Policy, worker: ReviewWorker, review: Review, caplog: pytest.LogCaptureFixture
) -> None:
    failing = FailingEngine(policy)
    client = TestClient(create_app(lambda: failing, worker=worker))

    response = response_of(client.post("/validate", content=large(review, uid="boom-w")))

    assert (response["uid"], response["allowed"], response["status"]["code"]) == (
        "boom-w",
        False,
        500,
    )
    assert "crashed on purpose" not in response["status"]["message"]
    [record] = [r for r in caplog.records if r.getMessage() == "engine failed"]
    assert record.levelno == logging.ERROR
    assert record.__dict__["uid"] == "boom-w"
    assert "rule crashed on purpose" in record.__dict__["exception"]


def test_a_worker_that_dies_costs_its_review_a_503_and_the_next_one_gets_a_new_worker(
    policy: Policy, engine: Engine, review: Review
) -> None:
    worker = ReviewWorker()
    dying = DyingEngine(policy)
    try:
        lost = TestClient(create_app(lambda: dying, worker=worker))
        judged = TestClient(create_app(lambda: engine, worker=worker))

        reply = lost.post("/validate", content=large(review, uid="lost"))
        after = judged.post("/validate", content=large(review, uid="after"))
    finally:
        worker.stop()

    assert reply.status_code == 503
    assert reply.headers["connection"] == "close"
    assert reply.headers["retry-after"] == "1"
    assert "review worker stopped" in reply.json()["error"]
    assert response_of(after)["uid"] == "after"


def test_a_worker_stuck_past_its_deadline_is_killed_replaced_and_counted(
    policy: Policy, engine: Engine, review: Review
) -> None:
    metrics = Metrics()
    worker = ReviewWorker(deadline_seconds=2.0, on_restart=metrics.worker_restarted)
    stuck = StuckEngine(policy)
    try:
        worker.start()
        lost = TestClient(create_app(lambda: stuck, worker=worker, metrics=metrics))
        judged = TestClient(create_app(lambda: engine, worker=worker))
        started = time.monotonic()
        reply = lost.post("/validate", content=large(review, uid="stuck"))
        took = time.monotonic() - started
        after = judged.post("/validate", content=large(review, uid="after"))
    finally:
        worker.stop()

    assert reply.status_code == 503
    assert reply.headers["retry-after"] == "1"
    assert "did not answer this review within 2 s" in reply.json()["error"]
    assert took < 10
    assert response_of(after)["uid"] == "after"
    restarts = metrics.registry.get_sample_value(
        "gpu_admission_review_worker_restarts_total", {"reason": "deadline"}
    )
    assert restarts == 1


def test_a_stopped_worker_leaves_no_semaphore_for_the_resource_tracker_to_report(
    tmp_path: Path,
) -> None:
    script = tmp_path / "stop.py"
    script.write_text(
        "from webhook.http.offload import ReviewWorker\n"
        "if __name__ == '__main__':\n"
        "    worker = ReviewWorker()\n"
        "    worker.start()\n"
        "    worker._running().submit(sum, [1]).result()\n"
        "    worker.stop()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}

    stopped = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env
    )

    assert stopped.returncode == 0, stopped.stderr
    assert "leaked" not in stopped.stderr


def test_a_worker_killed_while_idle_is_replaced_for_the_next_review(
    engine: Engine, review: Review
) -> None:
    worker = ReviewWorker()
    try:
        client = TestClient(create_app(lambda: engine, worker=worker))
        first = response_of(client.post("/validate", content=large(review, uid="first")))
        executor = worker._running()
        for process in list(executor._processes.values()):
            process.kill()
            process.join()
        deadline = time.monotonic() + 10
        while not executor._broken and time.monotonic() < deadline:
            time.sleep(0.01)  # the pool notices its worker is gone

        after = client.post("/validate", content=large(review, uid="after"))
    finally:
        worker.stop()

    assert first["uid"] == "first"
    assert after.status_code == 200
    assert response_of(after)["uid"] == "after"


def test_large_bodies_past_the_budget_are_answered_503_at_once(
    engine: Engine, review: Review
) -> None:
    body = large(review, uid="over")
    client = TestClient(create_app(lambda: engine, body_budget_bytes=len(body) - 1))

    reply = client.post("/validate", content=body)

    assert reply.status_code == 503
    assert reply.headers["connection"] == "close"
    assert reply.headers["retry-after"] == "1"
    assert "try again" in reply.json()["error"]


def test_the_budget_is_given_back_once_a_large_review_is_answered(
    engine: Engine, review: Review
) -> None:
    body = large(review, uid="fits")
    app = create_app(lambda: engine, body_budget_bytes=2 * len(body))
    client = TestClient(app)

    replies = [client.post("/validate", content=body) for _ in range(3)]

    assert [r.status_code for r in replies] == [200, 200, 200]
    assert app.state.body_budget.held == 0


def test_a_large_review_with_no_engine_to_judge_it_is_answered_500_with_the_uid(
    worker: ReviewWorker, review: Review
) -> None:
    def no_engine() -> Engine:
        raise RuntimeError("policy vanished")

    client = TestClient(create_app(no_engine, worker=worker))

    response = response_of(client.post("/validate", content=large(review, uid="no-engine")))

    assert (response["uid"], response["allowed"], response["status"]["code"]) == (
        "no-engine",
        False,
        500,
    )
