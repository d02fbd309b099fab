"""One review from body to reply: decode, call the engine, encode.

These are plain functions of bytes and values, with no HTTP and no event loop, so the
same code judges a small body on the event loop and a large one in the review worker's
process (``webhook.http.offload``). What the edge needs afterwards (the status, the
encoded reply, what to count and log) comes back as one picklable ``Judged``; every
reply of the review routes is made here, the HTTP errors of a request not judged too
(``refused``). A review that needs claims read first comes back as a ``ToRead``.
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


@dataclass(frozen=True, slots=True)
class Asked:
    """What a reply answers, for the log: the review's uid and what it was about."""

    uid: str | None = None
    operation: str = ""
    namespace: str = ""
    name: str = ""

    @classmethod
    def of(cls, request: AdmissionRequest) -> Asked:
        return cls(request.uid, request.operation, request.namespace, request.name)


NOBODY = Asked()
"""What a reply to a body that is not a review (or not read) answers."""


@dataclass(frozen=True)
class Judged:
    """A review answered: the reply and what the edge counts and logs of it. Every one is
    made by the functions below, the one place a reply is encoded."""

    status: int
    reply: bytes
    asked: Asked = NOBODY
    decision: Decision | None = None
    """The engine's decision (from the review worker without its patch, which ``reply``
    carries already); None when there is none: a body that is not a review, or an engine
    that failed."""
    failure: str | None = None
    """What went wrong for the log: the traceback of an engine that failed, a reply over
    its cap."""
    reason: str = ""
    """Why a body is not a review (HTTP 400), for the log."""


@dataclass(frozen=True)
class ToRead:
    """A review not judged yet: the templates and claims to read first (``judge_body``)."""

    asked: Asked
    sources: tuple[ClaimSource, ...]


def encode(content: Any) -> bytes:
    return orjson.dumps(content)


def refused(status: int, message: str, uid: str | None = None) -> Judged:
    """The reply to a request the service does not judge (a body too large, no room for it
    now, cut off; a worker lost): an HTTP error status and ``{"error": message}``."""
    return Judged(status, encode({"error": message}), Asked(uid))


def decode(body: bytes | bytearray) -> AdmissionRequest | Judged:
    """The request of the review in ``body``, or the HTTP 400 that answers a body that is
    not one."""
    try:
        return read_request(body)
    except InvalidReview as error:
        reason = str(error)
        return dataclasses.replace(refused(400, reason, request_uid(body)), reason=reason)


def judged(request: AdmissionRequest, decision: Decision) -> Judged:
    """The reply to the review of ``request`` carrying ``decision``; an error saying so
    when that reply would be over ``MAX_REPLY_BYTES``."""
    reply = encode(complete(request.uid, decision))
    if len(reply) > MAX_REPLY_BYTES:
        message = REPLY_TOO_LARGE.format(size=len(reply), cap=MAX_REPLY_BYTES)
        return failed(Asked.of(request), message, message)
    return Judged(200, reply, Asked.of(request), decision=decision)


def failed(asked: Asked, failure: str | None = None, message: str = INTERNAL_ERROR) -> Judged:
    """The reply to a review that could not be answered (an engine that failed, a reply
    over its cap): ``allowed: false``, code 500, the uid echoed; a traceback is for the
    log, never for the reply."""
    reply = encode(errored(asked.uid or "", 500, message))
    return Judged(200, reply, asked, failure=failure)


def judge_body(
    webhook: str,
    engine: Engine,
    body: bytes | bytearray,
    inventory: Inventory,
    claims: ClaimObjects | None = None,
) -> Judged | ToRead:
    """Decode and judge by the handler named ``webhook`` in one go (the review worker's
    whole job). Autoscaler targets are
    not read here: a large body is never a HorizontalPodAutoscaler worth warning about.

    With `claims` None, a review whose pods name templates or claims is not judged: a
    ``ToRead`` says which, for the caller to read them and judge the body again with
    them."""
    request = decode(body)
    if isinstance(request, Judged):
        return request
    try:
        if claims is None:
            sources = engine.claim_sources(request, handler=webhook)
            if sources:
                return ToRead(Asked.of(request), sources)
        decision = engine.answer(webhook, Review(request, inventory, claims or NO_CLAIMS))
    except Exception:
        return failed(Asked.of(request), traceback.format_exc())
    answered = judged(request, decision)
    if answered.decision is None or not answered.decision.patch:
        return answered
    # the patch is in the reply already: not pickled back a second time
    return dataclasses.replace(answered, decision=dataclasses.replace(decision, patch=()))
