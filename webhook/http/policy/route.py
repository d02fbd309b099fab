"""``/validate-policy``: the webhook of the policy ConfigMap, so that `kubectl apply` of a
broken policy fails with every problem, its line, field path and reason.

The body is read within bounds of its own (``POLICY_BODY_BYTES``, answered 413; a policy
is at most 256 KiB, and an UPDATE carries it twice) and on the budget of large bodies
(``webhook.http.body``, with its share per source). It is decoded on the event loop
(about 1 ms for the largest body: the review around one long string), and what needs no
compiling is answered there (``webhook.http.policy.verdict``). A policy to compile goes to
the queue of ``webhook.http.policy.queue``: kept verdicts by digest, the sources taken
in turn, a bounded share per source; the compiling itself runs in the review worker's
process when there is one (``webhook.http.offload``), so that a policy's YAML never
holds the event loop's GIL while pods wait, and in a thread otherwise.

The policy's webhook scope is judged by what ``scope`` gives for each review: a judge
holding the live configurations as the replica last read them
(``webhook.service.webhook_scope`` reads them in a thread of its own, so that a review
never waits on the API); see ``webhook.http.policy.verdict``. A policy that view would
refuse is judged again by what ``fresh`` gives, the configurations read again: no refusal
rests on an old view (of before the configurations applied a moment ago with the policy,
say), and only a refusal waits on the API.

Refusals say when to try again (Retry-After): 429 for a source with as many policies
waiting as it may have, 503 when the queue is full or the worker failed. The reply and its
counting (``gpu_admission_requests_total{webhook="validate-policy"}``) are a review's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from fastapi.responses import Response
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from webhook.engine import Decision
from webhook.engine.handlers.policy_configmap import VALIDATE_POLICY
from webhook.http.body import BodyLimits, BodyRefused, received_body, source_address
from webhook.http.counting import count
from webhook.http.judging import Asked, Judged, decode, failed, judged, refused
from webhook.http.metrics import Metrics
from webhook.http.offload import ReviewWorker, WorkerFailed
from webhook.http.policy.queue import ChecksBusy, PolicyChecks, Verdict
from webhook.http.policy.verdict import (
    SCOPE_NOT_COMPARED,
    PolicyQuestion,
    ScopeJudge,
    policy_question,
    policy_verdict,
    verdict_decision,
)
from webhook.http.replies import review_reply

log = logging.getLogger("gpu_admission.http")

WEBHOOK = VALIDATE_POLICY.name
PATH = VALIDATE_POLICY.path

POLICY_BODY_BYTES = 1024 * 1024
"""The largest body of a policy review answered: a policy of at most 256 KiB in object
and oldObject, JSON-escaped, and the review around them."""

SOURCE_BUSY = refused(
    429, "as many policies from this address are being judged as it may have; try again"
)
QUEUE_FULL = refused(503, "as many policies are being judged as fit; try again")


def policy_body_limits(limits: BodyLimits) -> BodyLimits:
    """The bounds of a policy review's body: ``limits`` (a pod review's), capped lower."""
    return BodyLimits(min(limits.max_bytes, POLICY_BODY_BYTES), limits.small_bytes, limits.budget)


#: The judge of a policy's webhook scope now; never blocks.
CurrentScopeJudge = Callable[[], ScopeJudge]


class PolicyRoute:
    """The ASGI app of ``/validate-policy``; without `scope`, no policy's webhook scope
    is judged."""

    def __init__(
        self,
        limits: BodyLimits,
        metrics: Metrics,
        worker: ReviewWorker | None = None,
        scope: CurrentScopeJudge | None = None,
        fresh: CurrentScopeJudge | None = None,
    ) -> None:
        self.limits = policy_body_limits(limits)
        self.metrics = metrics
        self.worker = worker
        self.scope = scope
        self.fresh = fresh
        self.checks = PolicyChecks(self._compile)
        self.path = PATH

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        answered = await self._answer(Request(scope, receive))
        if answered is None:
            reply = Response(status_code=204)  # nobody is listening any more
        else:
            count(self.metrics, WEBHOOK, answered, started)
            reply = review_reply(answered)
        await reply(scope, receive, send)

    async def _answer(self, request: Request) -> Judged | None:
        try:
            async with received_body(request, self.limits) as body:
                review = decode(body)
        except BodyRefused as refusal:
            return refused(refusal.status, refusal.reply)
        except ClientDisconnect:
            return None
        if isinstance(review, Judged):
            return review
        question = policy_question(review, None if self.scope is None else self.scope())
        if isinstance(question, Decision):
            return judged(review, question)
        try:
            verdict = await self.checks.verdict(source_address(request), question)
            if self._refused_on_a_view(verdict, question):
                question = await self._asked_afresh(question)
                verdict = await self.checks.verdict(source_address(request), question)
        except ChecksBusy as busy:
            return SOURCE_BUSY if busy.per_source else QUEUE_FULL
        except WorkerFailed as lost:
            return refused(503, lost.message, review.uid)
        except Exception:
            log.exception("policy check failed", extra={"uid": review.uid})
            return failed(Asked.of(review))
        return judged(review, verdict_decision(verdict, question.scope))

    def _refused_on_a_view(self, verdict: Verdict, question: PolicyQuestion) -> bool:
        """Whether the refusal may rest on the live configurations as last read."""
        judged_scope = question.scope is not None and self.fresh is not None
        return judged_scope and verdict is not None and verdict != SCOPE_NOT_COMPARED

    async def _asked_afresh(self, question: PolicyQuestion) -> PolicyQuestion:
        """`question` with the scope judge of the configurations read again (off the event
        loop: it may wait on the API)."""
        assert self.fresh is not None and question.scope is not None
        fresh = await asyncio.to_thread(self.fresh)
        if fresh.key == question.scope.key:
            return question
        return dataclasses.replace(question, scope=fresh)

    async def _compile(self, question: PolicyQuestion) -> Verdict:
        if self.worker is not None:
            return await self.worker.check_policy(question)
        return await asyncio.to_thread(policy_verdict, question)
