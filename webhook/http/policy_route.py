"""``/validate-policy``: the webhook of the policy ConfigMap, so that `kubectl apply` of a
broken policy fails with every problem, its line, field path and reason.

The body is read within bounds of its own (``POLICY_BODY_BYTES``, answered 413; a policy
is at most 256 KiB, and an UPDATE carries it twice) and on the budget of large bodies
(``webhook.http.body``). It is decoded and its policy judged (``webhook.http.policy_check``)
in a thread, as the reloader compiles a policy, never on the event loop: a large policy
then holds up no review of a pod for longer than the interpreter's switch interval. One
policy is judged at a time; a policy review arriving meanwhile is answered 503 with
Retry-After (the webhook fails open, and kube-apiserver retries), so a flood of policies
costs one thread's work, not one per request. The reply and its counting
(``gpu_admission_requests_total{webhook="validate-policy"}``) are a review's.
"""

from __future__ import annotations

import asyncio
import logging
import time

from fastapi.responses import Response
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from webhook.http.body import BodyBudgetSpent, BodyLimits, BodyTooLarge, received_body
from webhook.http.counting import count
from webhook.http.judging import Judged, decode, encode, failed, judged
from webhook.http.metrics import Metrics
from webhook.http.policy_check import judge_policy_configmap
from webhook.http.replies import review_reply

log = logging.getLogger("gpu_admission.http")

WEBHOOK = "validate-policy"
PATH = f"/{WEBHOOK}"

POLICY_BODY_BYTES = 1024 * 1024
"""The largest body of a policy review answered: a policy of at most 256 KiB in object
and oldObject, JSON-escaped, and the review around them."""


def policy_body_limits(limits: BodyLimits) -> BodyLimits:
    """The bounds of a policy review's body: ``limits`` (a pod review's), capped lower."""
    return BodyLimits(min(limits.max_bytes, POLICY_BODY_BYTES), limits.small_bytes, limits.budget)


def judge_policy_body(body: bytes | bytearray) -> Judged:
    """Decode the review in `body` and judge its policy ConfigMap (run in a thread)."""
    review = decode(body)
    if isinstance(review, Judged):
        return review
    try:
        decision = judge_policy_configmap(review)
    except Exception:
        log.exception("policy check failed", extra={"uid": review.uid})
        return failed(review)
    return judged(review, decision)


class PolicyRoute:
    """The ASGI app of ``/validate-policy``."""

    def __init__(self, limits: BodyLimits, metrics: Metrics) -> None:
        self.limits = policy_body_limits(limits)
        self.metrics = metrics
        self._judging = asyncio.Semaphore(1)

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
        if self._judging.locked():
            return BUSY
        try:
            async with received_body(request, self.limits) as body:
                return await self._judge(body)
        except BodyTooLarge:
            return Judged(
                413, encode({"error": f"request body exceeds {self.limits.max_bytes} bytes"})
            )
        except BodyBudgetSpent:
            return Judged(503, encode({"error": "too many large reviews at once; try again"}))
        except ClientDisconnect:
            return None

    async def _judge(self, body: bytearray) -> Judged:
        if self._judging.locked():  # taken while this body was read
            return BUSY
        await self._judging.acquire()
        judging = asyncio.ensure_future(asyncio.to_thread(judge_policy_body, body))
        # Held until the thread is done, even if this request is cancelled first.
        judging.add_done_callback(lambda _: self._judging.release())
        return await asyncio.shield(judging)


BUSY = Judged(503, encode({"error": "another policy is being judged; try again"}))
"""The answer while a policy is judged: one at a time."""
