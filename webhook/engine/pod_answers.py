"""The engine's answers for a pod worked out once per pod template, not once per replica.

A review's answer for a pod (what the rules find in it, the patch its mutation needs)
depends on nothing of the pod but its labels, its annotations and its spec, and, of
the rest, on the policy (one per engine) and what the cluster has now. The replicas
of a Deployment, the workers of a Job, the pods of a ReplicaSet scaled up carry the same
of each, under other names and uids; so an engine keeps each answer by the JSON text
of those three (orjson, in the pod's own order) and answers the next replica by
looking it up.

A pod that names claims is kept with the objects of its claims as the review was handed
them (read from the cluster for each review): the same template read again keeps the
answer, an edited one does not. Not kept: parts beyond JSON, and pods whose parts are
over ``max_key_bytes`` of JSON. A tenant
who sends a new pod each time only fills the table: it holds ``max_answers`` at most
and starts over when full, and over again when what the cluster has changes (another
``CapacityNow``). Answers are stored as they are handed out and must not be changed by
their callers: findings are tuples of frozen values, patches are kept as JSON text and
decoded afresh for each caller, who may apply them in place.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

from webhook.engine.capacity_now import CapacityNow
from webhook.engine.pod import PodView
from webhook.engine.pod_claims import NO_CLAIMS, ClaimObjects

MAX_ANSWERS = 512
MAX_KEY_BYTES = 16 * 1024

T = TypeVar("T")


def pod_key(
    pod: PodView, claims: ClaimObjects = NO_CLAIMS, max_key_bytes: int = MAX_KEY_BYTES
) -> bytes | None:
    """The JSON text an answer for `pod` is kept by; None when it is not to be kept. A pod
    that names claims is kept with what `claims` holds of each: the object as read, or
    why it was not (missing, unreadable, not looked up)."""
    metadata = pod.raw.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    named = [
        (source.kind, source.name, claims.found.get(source), claims.reason_unknown(source))
        for source in pod.resource_claims.values()
        if source is not None
    ]
    try:
        key = orjson.dumps((pod.labels, annotations, pod.spec, named))
    except (TypeError, orjson.JSONEncodeError):
        return None
    return key if len(key) <= max_key_bytes else None


class KeptAnswers(Generic[T]):
    """One kind of answer (findings, patches), by pod key, for one view of the cluster."""

    def __init__(self, max_answers: int = MAX_ANSWERS) -> None:
        self.max_answers = max_answers
        self._table: tuple[CapacityNow | None, dict[bytes, T]] = (None, {})

    def get(self, key: bytes, now: CapacityNow, work_out: Callable[[], T]) -> T:
        """The answer kept for `key` under `now`, worked out (and kept) when there is none."""
        seen, answers = self._table
        if seen is not now:
            answers = {}
            self._table = (now, answers)
        found = answers.get(key)
        if found is None:
            found = work_out()
            if len(answers) >= self.max_answers:
                answers.clear()
            answers[key] = found
        return found

    def __len__(self) -> int:
        return len(self._table[1])


class NothingKept(KeptAnswers[T]):
    """Keeps nothing: every pod is worked out afresh (what the first replica costs)."""

    def get(self, key: bytes, now: CapacityNow, work_out: Callable[[], T]) -> T:
        return work_out()


def kept_patch(
    table: KeptAnswers[bytes],
    key: bytes | None,
    now: CapacityNow,
    work_out: Callable[[], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """The patch for a pod: kept as JSON text, decoded afresh for each caller."""
    if key is None:
        return work_out()
    try:
        text = table.get(key, now, lambda: orjson.dumps(work_out()))
    except (TypeError, orjson.JSONEncodeError):
        return work_out()  # a value of the pod beyond JSON carried into the patch
    patch: list[dict[str, Any]] = orjson.loads(text)
    return patch
