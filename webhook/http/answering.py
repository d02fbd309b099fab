"""One review from HTTP request to ``Judged``: its body received within bounds, then
parsed, judged and its reply encoded, on the event loop or in the review worker.

Small bodies are judged on the event loop (a pod takes a fraction of a millisecond);
larger ones in the review worker's process when there is one (``webhook.http.offload``),
so that a 7 MB Deployment never holds up `/healthz` or the next pod. Either way the
steps are those of ``webhook.http.judging``: ``decode``, the engine's answer for the
route's handler (``Engine.answer``), then ``judged`` (or ``failed``). On the event loop,
the workload an autoscaler under review targets is read between parsing and judging
(``webhook.http.scaled_workloads``), and the templates and claims the pods under review
name (``webhook.http.claim_reader``); in the worker, a review naming them comes back
unjudged with their names, and is judged again once they are read.

A body over the cap is answered 413, one the service has no room for now 503, one cut
off for a whole body that needed its room 408 (see ``webhook.http.body``); a body that
is not a review is logged and answered 400. An engine that fails, or cannot be built,
is logged with the review's uid and answered ``allowed: false`` with code 500. A
client that goes away before its body arrived is logged at debug level and answered
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import ClientDisconnect, Request

from webhook.engine import AdmissionRequest, Engine
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.handlers import Review
from webhook.engine.inventory import Inventory
from webhook.http.body import BodyLimits, BodyRefused, received_body
from webhook.http.claim_reader import ClaimReader
from webhook.http.judging import Asked, Judged, ToRead, decode, failed, judged, refused
from webhook.http.offload import ReviewWorker
from webhook.http.review import request_uid
from webhook.http.scaled_workloads import ScaledWorkload, ScaledWorkloadReader

log = logging.getLogger("gpu_admission.http")


@dataclass(frozen=True)
class ReviewAnswerer:
    """Answers the reviews of one app."""

    engine: Callable[[], Engine]
    """The engine of one review (it may change on policy reload)."""
    cluster: Callable[[], Inventory]
    """What the cluster has now, handed to the engine with each review."""
    limits: BodyLimits
    """Bodies over ``limits.small_bytes`` go to the worker, when there is one."""
    worker: ReviewWorker | None = None
    scaled_workloads: ScaledWorkloadReader | None = None
    """Without it, autoscalers are judged without their workload."""
    claims: ClaimReader | None = None
    """Without it, the claims pods name are not read (and so not judged)."""

    async def answer(self, request: Request, webhook: str) -> Judged | None:
        """The reply to ``request`` and what to count of it; None if the client went away
        before its body arrived."""
        try:
            async with received_body(request, self.limits) as body:
                answered = await self._judge(webhook, body)
        except BodyRefused as refusal:
            return refused(refusal.status, refusal.reply)
        except ClientDisconnect:
            log.debug("the client went away before its request body arrived")
            return None
        if answered.status == 400:
            log.info(
                "invalid admission review",
                extra={"uid": answered.asked.uid, "reason": answered.reason},
            )
        return answered

    async def _judge(self, webhook: str, body: bytearray) -> Judged:
        """``body`` judged in the worker when it is large and there is an engine to send
        it; on the event loop otherwise (where an engine that cannot be built is answered
        with the review's uid)."""
        worker = self.worker if len(body) > self.limits.small_bytes else None
        engine = _built(self.engine) if worker is not None else None
        if worker is not None and engine is not None:
            return await self._judge_in_worker(worker, webhook, engine, body)
        return await self._judge_here(webhook, body)

    async def _judge_in_worker(
        self, worker: ReviewWorker, webhook: str, engine: Engine, body: bytearray
    ) -> Judged:
        """The review judged in the worker; a failure to hand it over (what the worker is
        sent does not pickle, say) is answered as an engine failure is, with the review's
        uid, never left to the ASGI server's bare 500."""
        try:
            return await self._handed_to_worker(worker, webhook, engine, body)
        except Exception:
            uid = request_uid(body)
            log.exception("the review could not be judged in the worker", extra={"uid": uid})
            return failed(Asked(uid))

    async def _handed_to_worker(
        self, worker: ReviewWorker, webhook: str, engine: Engine, body: bytearray
    ) -> Judged:
        inventory = self.cluster()
        first = NO_CLAIMS if self.claims is None else None
        answered = await worker.judge(webhook, engine, inventory, body, first)
        if isinstance(answered, ToRead) and self.claims is not None:
            asked = answered.asked
            claims = await self.claims.read_all(asked.namespace, answered.sources, asked.uid or "")
            answered = await worker.judge(webhook, engine, inventory, body, claims)
        if isinstance(answered, ToRead):  # never: a review with its claims is judged
            return failed(answered.asked, "judged without the claims it was given")
        if answered.failure is not None:
            log.error(
                "engine failed", extra={"uid": answered.asked.uid, "exception": answered.failure}
            )
        return answered

    async def _judge_here(self, webhook: str, body: bytes | bytearray) -> Judged:
        request = decode(body)
        if isinstance(request, Judged):
            return request
        try:
            engine = self.engine()
            scaled = await self._scaled(webhook, engine, request)
            claims = await self._claims(engine, request, webhook)
            review = Review(
                request,
                self.cluster(),
                claims,
                None if scaled is None else scaled.workload,
                None if scaled is None else scaled.target,
            )
            decision = engine.answer(webhook, review)
        except Exception:
            log.exception("engine failed", extra={"uid": request.uid})
            return failed(Asked.of(request))
        answered = judged(request, decision)
        if answered.failure is not None:  # a reply over the cap
            log.error("reply not sent", extra={"uid": request.uid, "reason": answered.failure})
        return answered

    async def _scaled(
        self, webhook: str, engine: Engine, request: AdmissionRequest
    ) -> ScaledWorkload | None:
        """Only the handler of autoscalers warns of what one can scale to."""
        if self.scaled_workloads is None or not engine.routes.reads_scale_target(webhook, request):
            return None
        return await self.scaled_workloads.scaled(engine, request)

    async def _claims(
        self, engine: Engine, request: AdmissionRequest, webhook: str
    ) -> ClaimObjects:
        if self.claims is None:
            return NO_CLAIMS
        return await self.claims.objects(engine, request, webhook)


def _built(engine: Callable[[], Engine]) -> Engine | None:
    try:
        return engine()
    except Exception:
        return None
