"""``/validate-policy``: the webhook of the policy ConfigMap, so that `kubectl apply` of a
broken policy fails with every problem, its line, field path and reason.

The body is read within the same bounds as a pod's (``webhook.http.body``: the cap and the
budget of large bodies) and parsed as any review (``webhook.http.judging.decode``: not a
review, HTTP 400). The policy is judged by ``webhook.http.policy_check`` in a thread, as
the reloader compiles a policy: a large policy then holds up no review of a pod for
longer than the interpreter's switch interval. The reply and its counting
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


class PolicyRoute:
    """The ASGI app of ``/validate-policy``."""

    def __init__(self, limits: BodyLimits, metrics: Metrics) -> None:
        self.limits = limits
        self.metrics = metrics

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
        review = decode(body)
        if isinstance(review, Judged):
            return review
        try:
            decision = await asyncio.to_thread(judge_policy_configmap, review)
        except Exception:
            log.exception("policy check failed", extra={"uid": review.uid})
            return failed(review)
        return judged(review, decision)
