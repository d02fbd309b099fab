"""FastAPI app factory: the routes, and the bounds they answer within.

Each webhook the engine judges (``webhook.engine.handlers``) has a route at its own path
(``/mutate``, ``/validate-bindings``, ...), which hands each review to a ``ReviewAnswerer``
(``webhook.http.answering``: body received, parsed, judged, reply encoded), count what
came of it under the handler's name (``webhook.http.counting``) and send the reply
(``webhook.http.replies``). A route answers a request of another handler's too (webhook
configurations of before sent every one to ``/mutate`` or ``/validate``), judged by that
handler. ``/validate-policy`` judges the policy ConfigMap (``webhook.http.policy.route``) within
the same body bounds, its compiling in the same worker, its webhook scope by the judge
``scope_judge`` gives (the live configurations as last read).

Error channels: a body that is not an AdmissionReview gets HTTP 400 (413 when too
large), so kube-apiserver applies the failurePolicy; so does a review the service has
no room for right now (503: too many large bodies held at once, see
``webhook.http.body``, or a review worker that died). Anything the engine raises
unexpectedly becomes `allowed: false` with code 500, the uid echoed and the traceback
logged with that uid. A client that goes away before its body arrived is not an error
of ours: it is answered nothing.

Every answered review is counted and timed in `Metrics` (see webhook.http.metrics), which
the metrics app exposes on a port of its own (``webhook.http.metrics_app``); the
engine itself knows nothing of metrics.

The review routes are plain ASGI routes (``ReviewRoute``), not FastAPI endpoints:
they take no parameters to resolve or validate, and FastAPI's request handler (its
dependency solving, query parsing and per-request exit stack) cost more CPU than the
engine's judging of a pod. FastAPI's OpenTelemetry hooks are off: the service reports
through Prometheus and configures no OpenTelemetry provider, yet each request would
look the global ones up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import Response
from fastapi.telemetry import TelemetryConfig
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from webhook.engine import Engine
from webhook.engine.handlers import HANDLERS, HandlerRegistry
from webhook.engine.inventory import UNKNOWN, Inventory
from webhook.http.answering import ReviewAnswerer
from webhook.http.body import BodyBudget, BodyLimits
from webhook.http.claim_reader import ClaimReader, ReadClaim
from webhook.http.counting import count
from webhook.http.metrics import Metrics
from webhook.http.offload import ReviewWorker
from webhook.http.policy.route import CurrentScopeJudge, PolicyRoute
from webhook.http.readiness import Readiness
from webhook.http.replies import json_reply, review_reply
from webhook.http.scaled_workloads import ScaledWorkloadReader, ScaledWorkloads

__all__ = [
    "BODY_BUDGET_BYTES",
    "INLINE_BODY_BYTES",
    "MAX_BODY_BYTES",
    "SCALED_WORKLOAD_SECONDS",
    "ReadClaim",
    "Readiness",
    "ScaledWorkloads",
    "create_app",
]

MAX_BODY_BYTES = 7 * 1024 * 1024
"""kube-apiserver caps request bodies at 3 MiB, and defaulting can double an object on
its way to us (the issue's 3 MiB Deployment of bare containers arrives as 6.9 MB); an
UPDATE review holds object and oldObject. A body over this is answered 413."""

CLAIM_SECONDS = 2.0
"""Longest wait for the templates and claims of one review, well within the webhook's
timeout: a pod whose claims cannot be read in time is refused, saying so."""

INLINE_BODY_BYTES = 32 * 1024
"""Bodies up to this size are judged on the event loop (about 10 ms of engine time at
most); larger ones in the review worker. Ordinary pods are 2 to 10 KB."""

BODY_BUDGET_BYTES = 16 * 1024 * 1024
"""Bytes of bodies over ``INLINE_BODY_BYTES`` held at once, received or waiting for the
worker: two of the largest. With the worker's 100 MiB peak on one of them and the server's
own 75 MiB, this is what fits under the Deployment's 256 MiB. One source address holds at
most half of it (one of the largest), and bodies that stall give way to whole ones
(``webhook.http.body``)."""

NO_TELEMETRY: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "operation_spans": False,
}
"""FastAPI's OpenTelemetry hooks, off: metrics are Prometheus's (``webhook.http.metrics``)."""

SCALED_WORKLOAD_SECONDS = 2.0
"""The longest a review waits for an autoscaler's target (its webhook's timeout is 3 s);
the client's own timeouts apply per connection attempt and its retries add up."""


def create_app(
    engine: Callable[[], Engine],
    readiness: Readiness | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    metrics: Metrics | None = None,
    inventory: Callable[[], Inventory] | None = None,
    scaled_workloads: ScaledWorkloads | None = None,
    worker: ReviewWorker | None = None,
    body_budget_bytes: int = BODY_BUDGET_BYTES,
    claims: ReadClaim | None = None,
    body_share_per_source: int | None = None,
    scope_judge: CurrentScopeJudge | None = None,
    handlers: HandlerRegistry = HANDLERS,
    fresh_scope_judge: CurrentScopeJudge | None = None,
) -> FastAPI:
    """`engine` returns the engine to use for one review (it may change on policy reload).

    `metrics` is where reviews are counted (a new `Metrics` unless given); `inventory`
    returns what the cluster has now, handed to the engine with each review (without
    it, or until it has synced, the engine uses the policy's static figures);
    `scaled_workloads` reads the workload an autoscaler under review targets (without
    it, autoscalers are admitted without looking); `worker` judges bodies over
    ``INLINE_BODY_BYTES`` (without it, every body is judged on the event loop); `claims`
    reads the templates and claims pods name (without it, they are not judged);
    `body_share_per_source` is the most one source address holds of the large-body
    budget (half of it unless given); `scope_judge` gives the judge of a policy
    ConfigMap's webhook scope, holding the live configurations as last read (without it,
    no policy's scope is judged), and `fresh_scope_judge` the one of the configurations
    read again, asked before a policy is refused for its scope; `handlers` are the
    webhooks routed, those of the engines `engine` returns.
    """
    app = FastAPI(
        title="gpu-admission",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        telemetry=NO_TELEMETRY,
    )
    probes = readiness or Readiness()
    counted = metrics or Metrics()
    answerer = ReviewAnswerer(
        engine,
        cluster=inventory or (lambda: UNKNOWN),
        limits=_body_limits(max_body_bytes, body_budget_bytes, body_share_per_source),
        worker=worker,
        scaled_workloads=(
            None
            if scaled_workloads is None
            else ScaledWorkloadReader(scaled_workloads, SCALED_WORKLOAD_SECONDS)
        ),
        claims=None if claims is None else ClaimReader(claims, CLAIM_SECONDS),
    )
    app.state.metrics = counted
    app.state.body_budget = answerer.limits.budget

    policy_route = PolicyRoute(answerer.limits, counted, worker, scope_judge, fresh_scope_judge)
    _add_review_routes(app, handlers, answerer, counted, policy_route)
    _add_probes(app, probes)
    return app


def _add_review_routes(
    app: FastAPI,
    handlers: HandlerRegistry,
    answerer: ReviewAnswerer,
    counted: Metrics,
    policy_route: PolicyRoute,
) -> None:
    """A POST route per handler, at its path: the policy ConfigMap's to its own route, each
    other's to one that knows its handler by name."""
    for handler in handlers:
        if handler.path == policy_route.path:
            route: ReviewRoute | PolicyRoute = policy_route
        else:
            route = ReviewRoute(answerer, counted, handler.name)
        app.router.routes.append(Route(handler.path, route, methods=["POST"]))


def _body_limits(max_body: int, budget: int, share_per_source: int | None) -> BodyLimits:
    """The bounds of bodies: one's largest, those judged inline, those held at once."""
    share = budget // 2 if share_per_source is None else share_per_source
    return BodyLimits(max_body, INLINE_BODY_BYTES, BodyBudget(budget, share))


def _add_probes(app: FastAPI, probes: Readiness) -> None:
    @app.get("/healthz")
    async def healthz() -> Response:
        return json_reply({"status": "ok"}, 200)

    @app.get("/readyz")
    async def readyz() -> Response:
        ready, details = probes.report()
        return json_reply({"ready": ready, "checks": details}, 200 if ready else 503)


class ReviewRoute:
    """The ASGI app of one webhook's route: the review answered, counted and replied to."""

    def __init__(self, answerer: ReviewAnswerer, metrics: Metrics, webhook: str) -> None:
        self.answerer = answerer
        self.metrics = metrics
        self.webhook = webhook

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        answered = await self.answerer.answer(Request(scope, receive), self.webhook)
        if answered is None:
            reply = Response(status_code=204)  # nobody is listening any more
        else:
            count(self.metrics, self.webhook, answered, started)
            reply = review_reply(answered)
        await reply(scope, receive, send)
