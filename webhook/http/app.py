"""FastAPI app factory. Routes only decode, call the engine and encode.

Error channels: a body that is not an AdmissionReview gets HTTP 400 (413 when too
large), so kube-apiserver applies the failurePolicy; so does a review the service has
no room for right now (503: too many large bodies held at once, see
``webhook.http.body``, or a review worker that died). Anything the engine raises
unexpectedly becomes `allowed: false` with code 500, the uid echoed and the traceback
logged with that uid. A client that goes away before its body arrived is not an error
of ours: it is logged at debug level and answered nothing.

Small bodies are judged on the event loop (a pod takes a fraction of a millisecond);
larger ones in the review worker's process when one is given (``webhook.http.offload``),
so that a 7 MB Deployment never holds up `/healthz` or the next pod.

Every answered review is counted and timed in `Metrics` (see webhook.http.metrics), which
the metrics app exposes on a port of its own (``webhook.http.metrics_app``); the
engine itself knows nothing of metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from starlette.requests import ClientDisconnect

from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.autoscalers import ScaleTarget
from webhook.engine.decision import AUDIT, ENFORCE, EXEMPTION, WARN
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.templates import TemplateKind
from webhook.http.body import (
    BodyBudget,
    BodyBudgetSpent,
    BodyLimits,
    BodyTooLarge,
    received_body,
)
from webhook.http.judging import JUDGES, Judged, decode, encode, failed, judged
from webhook.http.metrics import Metrics
from webhook.http.offload import ReviewWorker
from webhook.http.review import to_engine_request

log = logging.getLogger("gpu_admission.http")

MAX_BODY_BYTES = 7 * 1024 * 1024
"""kube-apiserver caps request bodies at 3 MiB, and defaulting can double an object on
its way to us (the issue's 3 MiB Deployment of bare containers arrives as 6.9 MB); an
UPDATE review holds object and oldObject. A body over this is answered 413."""

INLINE_BODY_BYTES = 32 * 1024
"""Bodies up to this size are judged on the event loop (about 10 ms of engine time at
most); larger ones in the review worker. Ordinary pods are 2 to 10 KB."""

BODY_BUDGET_BYTES = 16 * 1024 * 1024
"""Bytes of bodies over ``INLINE_BODY_BYTES`` held at once, received or waiting for the
worker: two of the largest. With the worker's 100 MiB peak on one of them and the server's
own 75 MiB, this is what fits under the Deployment's 256 MiB."""

BUSY = (
    "gpu-admission holds as many large reviews as it can at once; "
    "try again in a few seconds, or send a smaller object"
)
JSON = "application/json"

SCALED_WORKLOAD_SECONDS = 2.0
"""The longest a review waits for an autoscaler's target (its webhook's timeout is 3 s);
the client's own timeouts apply per connection attempt and its retries add up."""

ScaledWorkloads = Callable[[ScaleTarget, tuple[TemplateKind, ...]], Mapping[str, Any] | None]
"""Reads the workload an autoscaler targets (a blocking call, run in a worker thread)."""


@dataclass
class Readiness:
    """What `/readyz` reports; later parts of the service add their checks here."""

    checks: dict[str, Callable[[], tuple[bool, str]]] = field(default_factory=dict)

    def report(self) -> tuple[bool, dict[str, Any]]:
        details = {}
        ready = True
        for name, check in self.checks.items():
            try:
                ok, detail = check()
            except Exception as error:  # a broken check means not ready, never a 500
                ok, detail = False, f"check failed: {error!r}"
            ready = ready and ok
            details[name] = {"ok": ok, "detail": detail}
        return ready, details


def create_app(
    engine: Callable[[], Engine],
    readiness: Readiness | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    metrics: Metrics | None = None,
    inventory: Callable[[], Inventory] | None = None,
    scaled_workloads: ScaledWorkloads | None = None,
    worker: ReviewWorker | None = None,
    body_budget_bytes: int = BODY_BUDGET_BYTES,
) -> FastAPI:
    """`engine` returns the engine to use for one review (it may change on policy reload).

    `metrics` is where reviews are counted (a new `Metrics` unless given); `inventory`
    returns what the cluster has now, handed to the engine with each review (without
    it, or until it has synced, the engine uses the policy's static figures);
    `scaled_workloads` reads the workload an autoscaler under review targets (without
    it, autoscalers are admitted without looking); `worker` judges bodies over
    ``INLINE_BODY_BYTES`` (without it, every body is judged on the event loop).
    """
    app = FastAPI(title="gpu-admission", docs_url=None, redoc_url=None, openapi_url=None)
    readiness = readiness or Readiness()
    counted = metrics or Metrics()
    cluster = inventory or (lambda: UNKNOWN)
    limits = BodyLimits(max_body_bytes, INLINE_BODY_BYTES, BodyBudget(body_budget_bytes))
    app.state.metrics = counted
    app.state.body_budget = limits.budget

    async def review(request: Request, webhook: str) -> Response:
        started = time.perf_counter()
        result = await answer(request, webhook)
        if result is None:
            return Response(status_code=204)  # nobody is listening any more
        decision = result.decision
        flagged: list[tuple[str, str]] = []
        if decision is None:
            outcome, rules = "error", []
        else:
            outcome = "allowed" if decision.allowed else "denied"
            rules = _rules(decision, ENFORCE) if not decision.allowed else []
            flagged = [("warned", rule) for rule in _rules(decision, WARN)]
            flagged += [("audited", rule) for rule in _rules(decision, AUDIT)]
            if EXEMPTION in decision.audit_annotations:
                flagged.append(("exempted", ""))
            if not decision.allowed:
                log.info(
                    "denied",
                    extra={
                        "uid": result.uid,
                        "namespace": result.namespace,
                        "object": result.name,
                        "rules": rules,
                        "reason": decision.message,
                    },
                )
        seconds = time.perf_counter() - started
        counted.review(webhook, result.operation, outcome, rules, seconds, flagged)
        headers = {"connection": "close"} if result.status in (413, 503) else None
        if result.status == 503:
            # kube-apiserver's client retries a 503 within the webhook's timeout only
            # when told when to: a review refused for a moment then gets through.
            headers = {**(headers or {}), "retry-after": "1"}
        return Response(result.reply, status_code=result.status, media_type=JSON, headers=headers)

    async def scaled_workload(
        current: Engine, request: AdmissionRequest
    ) -> Mapping[str, Any] | None:
        """The workload an autoscaler under review targets, if one is and it can be read;
        a failed read costs the autoscaler its warning, never its admission."""
        target = current.scale_target(request) if scaled_workloads is not None else None
        if target is None or scaled_workloads is None:
            return None
        try:
            return await asyncio.wait_for(
                run_in_threadpool(scaled_workloads, target, current.kinds),
                SCALED_WORKLOAD_SECONDS,
            )
        except Exception as error:
            log.warning(
                "cannot read the workload an autoscaler targets; admitted without a look",
                extra={
                    "uid": request.uid,
                    "target": f"{target.kind}/{target.name}",
                    "namespace": target.namespace,
                    "reason": str(error) or type(error).__name__,
                },
            )
            return None

    async def answer(request: Request, webhook: str) -> Judged | None:
        """The reply and what to count of it; None if the client went away first."""
        try:
            async with received_body(request, limits) as body:
                large = worker is not None and len(body) > INLINE_BODY_BYTES
                current = _built(engine) if large else None
                if worker is not None and current is not None:
                    result = await worker.judge(webhook, current, cluster(), body)
                    if result.failure is not None:
                        log.error(
                            "engine failed", extra={"uid": result.uid, "exception": result.failure}
                        )
                else:  # small, or no engine to send: judge_here answers that with the uid
                    result = await judge_here(webhook, bytes(body))
        except BodyTooLarge:
            return Judged(413, encode({"error": f"request body exceeds {max_body_bytes} bytes"}))
        except BodyBudgetSpent:
            return Judged(503, encode({"error": BUSY}))
        except ClientDisconnect:
            log.debug("the client went away before its request body arrived")
            return None
        if result.status == 400:
            log.info("invalid admission review", extra={"uid": result.uid, "reason": result.reason})
        return result

    async def judge_here(webhook: str, body: bytes) -> Judged:
        review = decode(body)
        if isinstance(review, Judged):
            return review
        try:
            current, engine_request = engine(), to_engine_request(review)
            scaled = await scaled_workload(current, engine_request)
            decision = JUDGES[webhook](current, engine_request, cluster(), scaled)
        except Exception:
            log.exception("engine failed", extra={"uid": review.request.uid})
            return failed(review)
        return judged(review, decision)

    @app.post("/mutate")
    async def mutate(request: Request) -> Response:
        return await review(request, "mutate")

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        return await review(request, "validate")

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok"}, 200)

    @app.get("/readyz")
    async def readyz() -> Response:
        ready, details = readiness.report()
        return _json({"ready": ready, "checks": details}, 200 if ready else 503)

    return app


def _built(engine: Callable[[], Engine]) -> Engine | None:
    try:
        return engine()
    except Exception:
        return None


def _rules(decision: Decision, mode: str) -> list[str]:
    """The rules the decision found violated in `mode`, once each."""
    return list(dict.fromkeys(v.rule for v in decision.violations if v.mode == mode))


def _json(content: Any, status: int) -> Response:
    return Response(orjson.dumps(content), status_code=status, media_type=JSON)
