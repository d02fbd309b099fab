"""One review from body to reply: decode, call the engine, encode.

These are plain functions of bytes and values, with no HTTP and no event loop, so the
same code judges a small body on the event loop and a large one in the review worker's
process (``webhook.http.offload``). What the edge needs afterwards (the status, the
encoded reply, what to count and log) comes back as one picklable ``Judged``.
"""

from __future__ import annotations

import dataclasses
import traceback
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.handlers import Review
from webhook.engine.inventory import Inventory
from webhook.http.review import InvalidReview, complete, errored, read_request, request_uid

INTERNAL_ERROR = "gpu-admission internal error; see its logs"

MAX_REPLY_BYTES = 4 * 1024 * 1024
"""The largest reply sent. The largest the engine makes is its patch of the largest object
it judges (about 100,000 JSON values): a Pod of some 12,000 GPU containers, each given its
GPU request, is a 2.6 MB body and a 1.6 MB reply (measured: the reply of a mutated Pod is
0.59 of its body). Past twice that, something is wrong (a rule run away, a patch of a
patch), and kube-apiserver should not have to read it: the review is answered
``allowed: false``, code 500, saying so."""
REPLY_TOO_LARGE = (
    "gpu-admission's reply to this review would be {size:,} bytes, over its cap of "
    "{cap:,}; see its logs"
)


@dataclass(frozen=True)
class Judged:
    """A review answered: the reply and what the edge counts and logs of it."""

    status: int
    reply: bytes
    uid: str | None = None
    operation: str = ""
    namespace: str = ""
    name: str = ""
    decision: Decision | None = None
    """The engine's decision (from the review worker without its patch, which ``reply``
    carries already); None when there is none: a body that is not a review, or an engine
    that failed."""
    failure: str | None = None
    """The traceback of an engine that failed, for the log."""
    reason: str = ""
    """Why a body is not a review (HTTP 400), for the log."""
    claim_sources: tuple[ClaimSource, ...] = ()
    """Not judged yet: the templates and claims to read first (``judge_body``)."""


def encode(content: Any) -> bytes:
    return orjson.dumps(content)


def decode(body: bytes | bytearray) -> AdmissionRequest | Judged:
    """The request of the review in ``body``, or the HTTP 400 that answers a body that is
    not one."""
    try:
        return read_request(body)
    except InvalidReview as error:
        reason = str(error)
        return Judged(400, encode({"error": reason}), uid=request_uid(body), reason=reason)


def judged(request: AdmissionRequest, decision: Decision) -> Judged:
    """The reply to the review of ``request`` carrying ``decision``; an error saying so
    when that reply would be over ``MAX_REPLY_BYTES``."""
    reply = encode(complete(request.uid, decision))
    if len(reply) > MAX_REPLY_BYTES:
        message = REPLY_TOO_LARGE.format(size=len(reply), cap=MAX_REPLY_BYTES)
        return Judged(
            200,
            encode(errored(request.uid, 500, message)),
            request.uid,
            request.operation,
            request.namespace,
            request.name,
            failure=message,
        )
    return Judged(
        200,
        reply,
        request.uid,
        request.operation,
        request.namespace,
        request.name,
        decision=decision,
    )


def failed(request: AdmissionRequest, failure: str | None = None) -> Judged:
    """The reply to a review the engine failed on: ``allowed: false``, code 500, the uid
    echoed; the traceback is for the log, never for the reply."""
    reply = encode(errored(request.uid, 500, INTERNAL_ERROR))
    return Judged(200, reply, request.uid, request.operation, failure=failure)


def judge_body(
    webhook: str,
    engine: Engine,
    body: bytes | bytearray,
    inventory: Inventory,
    claims: ClaimObjects | None = None,
) -> Judged:
    """Decode and judge by the handler named ``webhook`` in one go (the review worker's
    whole job). Autoscaler targets are
    not read here: a large body is never a HorizontalPodAutoscaler worth warning about.

    With `claims` None, a review whose pods name templates or claims is not judged: the
    ``Judged`` says which (``claim_sources``), for the caller to read them and judge the
    body again with them."""
    request = decode(body)
    if isinstance(request, Judged):
        return request
    try:
        if claims is None:
            sources = engine.claim_sources(request, handler=webhook)
            if sources:
                return Judged(
                    0,
                    b"",
                    request.uid,
                    request.operation,
                    request.namespace,
                    request.name,
                    claim_sources=sources,
                )
        decision = engine.answer(webhook, Review(request, inventory, claims or NO_CLAIMS))
    except Exception:
        return failed(request, traceback.format_exc())
    answered = judged(request, decision)
    if answered.decision is None or not answered.decision.patch:
        return answered
    # the patch is in the reply already: not pickled back a second time
    return dataclasses.replace(answered, decision=dataclasses.replace(decision, patch=()))
