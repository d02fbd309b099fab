"""FastAPI app factory. Routes only decode, call the engine and encode.

Error channels: a body that is not an AdmissionReview gets HTTP 400 (or 413
when too large), so kube-apiserver applies the failurePolicy; anything the
engine raises unexpectedly becomes `allowed: false` with code 500, the uid
echoed and the traceback logged with that uid. Never a 5xx.

Every answered review is counted and timed in `Metrics` (see webhook.metrics), which
`GET /metrics` exposes; the engine itself knows nothing of metrics.
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

from webhook.admission import (
    InvalidReview,
    complete,
    errored,
    parse_review,
    request_uid,
    to_engine_request,
)
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.autoscalers import ScaleTarget
from webhook.engine.decision import AUDIT, ENFORCE, EXEMPTION, WARN
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.engine.templates import TemplateKind
from webhook.metrics import CONTENT_TYPE, Metrics

log = logging.getLogger("gpu_admission.http")

MAX_BODY_BYTES = 7 * 1024 * 1024
"""kube-apiserver caps request bodies at 3 MiB; a review holds object and oldObject."""


class BodyTooLarge(Exception):
    pass


SCALED_WORKLOAD_SECONDS = 2.0
"""The longest a review waits for an autoscaler's target (its webhook's timeout is 3 s);
the client's own timeouts apply per connection attempt and its retries add up."""

Judge = Callable[[Engine, AdmissionRequest, Inventory, Mapping[str, Any] | None], Decision]
"""One webhook's call into the engine: engine, request, what the cluster has now and
the workload an autoscaler under review targets."""

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
) -> FastAPI:
    """`engine` returns the engine to use for one review (it may change on policy reload).

    `metrics` is where reviews are counted (a new `Metrics` unless given); `inventory`
    returns what the cluster has now, handed to the engine with each review (without
    it, or until it has synced, the engine uses the policy's static figures);
    `scaled_workloads` reads the workload an autoscaler under review targets (without
    it, autoscalers are admitted without looking).
    """
    app = FastAPI(title="gpu-admission", docs_url=None, redoc_url=None, openapi_url=None)
    readiness = readiness or Readiness()
    counted = metrics or Metrics()
    cluster = inventory or (lambda: UNKNOWN)
    app.state.metrics = counted

    async def review(request: Request, webhook: str, judge: Judge) -> Response:
        started = time.perf_counter()
        response, operation, decision = await answer(request, judge)
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
        seconds = time.perf_counter() - started
        counted.review(webhook, operation, outcome, rules, seconds, flagged)
        return response

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

    async def answer(request: Request, judge: Judge) -> tuple[Response, str, Decision | None]:
        """The reply, the operation reviewed ("" if unknown) and the engine's decision
        (None when there is none: a bad body, or an engine that failed)."""
        try:
            body = await _read_body(request, max_body_bytes)
        except BodyTooLarge:
            return _json({"error": f"request body exceeds {max_body_bytes} bytes"}, 413), "", None
        try:
            parsed = parse_review(body)
        except InvalidReview as error:
            uid = request_uid(body)
            log.info("invalid admission review", extra={"uid": uid, "reason": str(error)})
            return _json({"error": str(error)}, 400), "", None
        uid = parsed.request.uid
        operation = parsed.request.operation
        try:
            current, engine_request = engine(), to_engine_request(parsed)
            scaled = await scaled_workload(current, engine_request)
            decision = judge(current, engine_request, cluster(), scaled)
        except Exception:
            log.exception("engine failed", extra={"uid": uid})
            failed = errored(uid, 500, "gpu-admission internal error; see its logs")
            return _json(failed, 200), operation, None
        if not decision.allowed:
            log.info(
                "denied",
                extra={
                    "uid": uid,
                    "namespace": parsed.request.namespace,
                    "object": parsed.request.name,
                    "rules": _rules(decision, ENFORCE),
                    "reason": decision.message,
                },
            )
        return _json(complete(uid, decision), 200), operation, decision

    @app.post("/mutate")
    async def mutate(request: Request) -> Response:
        return await review(
            request, "mutate", lambda engine, req, now, scaled: engine.mutate(req, now)
        )

    @app.post("/validate")
    async def validate(request: Request) -> Response:
        return await review(
            request, "validate", lambda engine, req, now, scaled: engine.validate(req, now, scaled)
        )

    @app.get("/healthz")
    async def healthz() -> Response:
        return _json({"status": "ok"}, 200)

    @app.get("/readyz")
    async def readyz() -> Response:
        ready, details = readiness.report()
        return _json({"ready": ready, "checks": details}, 200 if ready else 503)

    @app.get("/metrics")
    async def metrics_page() -> Response:
        return Response(counted.exposition(), media_type=CONTENT_TYPE)

    return app


def _rules(decision: Decision, mode: str) -> list[str]:
    """The rules the decision found violated in `mode`, once each."""
    return list(dict.fromkeys(v.rule for v in decision.violations if v.mode == mode))


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _json(content: Any, status: int) -> Response:
    return Response(orjson.dumps(content), status_code=status, media_type="application/json")
