"""What must hold for every review, however hostile, and the tally of a fuzz run.

The engine, called directly, returns a decision and never raises; no decision is a
code 500; every patch applies to the object with jsonpatch, and our own application
of it (the pod as created) gives the same; messages and warnings stay short. The HTTP edge never answers 5xx; every readable review is answered with
its uid, and its patch applies. Each reply is timed; only the long run (`make fuzz`)
fails on a reply that takes more than `REPLY_SECONDS` of CPU, the normal suite makes
no timing claim.
"""

from __future__ import annotations

import base64
import gc
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson

from webhook.engine import Decision
from webhook.engine.patch import apply_patch

Json = Any

EXAMPLES_VARIABLE = "GPU_ADMISSION_FUZZ_EXAMPLES"
LONG_RUN = EXAMPLES_VARIABLE in os.environ
"""`make fuzz` sets the example count; the normal suite runs the short version."""
REPLY_SECONDS = 1.0
MESSAGE_LIMIT = 8_192
"""No denial, however many reasons, comes near this (see webhook.engine.decision)."""
WARNING_LIMIT = 256
"""kube-apiserver cuts a webhook's warnings longer than this; ours stay within it."""


def examples(short: int) -> int:
    """How many examples a fuzz test runs: `short` in the normal suite, else as set."""
    return int(os.environ.get(EXAMPLES_VARIABLE, short))


@dataclass
class Tally:
    """What a fuzz run saw, printed at the end of the session."""

    inputs: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    replies: int = 0
    slowest: tuple[float, str] = (0.0, "")
    """The most CPU time one reply took, and what it was."""
    slowest_wall: tuple[float, str] = (0.0, "")
    largest_body: int = 0
    bodies_over_a_megabyte: int = 0

    def body(self, size: int) -> None:
        self.largest_body = max(self.largest_body, size)
        self.bodies_over_a_megabyte += size > 2**20

    def timed(self, what: str, call: Callable[[], Any]) -> Any:
        """`call()`, timed. What a reply costs is the CPU time of this thread (the app
        answers on it): the fuzz shares its cores with whatever else runs, and the wall
        clock would charge a reply for them. The garbage collector is held off meanwhile:
        the fuzz's heap (hypothesis's, the generated objects) is not the service's."""
        gc.disable()
        try:
            started, cpu_started = time.perf_counter(), time.thread_time()
            result = call()
            cpu = time.thread_time() - cpu_started
            wall = time.perf_counter() - started
        finally:
            gc.enable()
        self.replies += 1
        self.slowest = max(self.slowest, (cpu, what))
        self.slowest_wall = max(self.slowest_wall, (wall, what))
        if LONG_RUN:
            assert cpu <= REPLY_SECONDS, f"{what} took {cpu:.2f} s of CPU ({wall:.2f} s)"
        return result

    def report(self) -> list[str]:
        if not self.replies:
            return []
        (cpu, what), (wall, wall_what) = self.slowest, self.slowest_wall
        return [
            f"fuzz inputs: {sum(self.inputs.values()):,} ({_counts(self.inputs)}); largest "
            f"body {self.largest_body:,} bytes, {self.bodies_over_a_megabyte:,} over 1 MiB",
            f"replies checked: {self.replies:,}; slowest {cpu * 1000:.0f} ms of CPU ({what}), "
            f"{wall * 1000:.0f} ms by the wall clock ({wall_what})",
            f"outcomes: {_counts(self.outcomes)}",
        ]


TALLY = Tally()


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in counter.most_common())


def check_decision(decision: Any, obj: Json, webhook: str) -> None:
    """A decision of the engine called directly on `obj`."""
    assert isinstance(decision, Decision), decision
    assert decision.code != 500, decision.message
    assert len(decision.message) <= MESSAGE_LIMIT, len(decision.message)
    assert all(len(w) <= WARNING_LIMIT for w in decision.warnings), decision.warnings
    assert len(decision.warnings) <= 11, len(decision.warnings)
    if decision.allowed:
        assert decision.code == 200
    else:
        assert decision.message
        assert not decision.patch
    if decision.patch:
        patched = jsonpatch.apply_patch(obj, list(decision.patch))
        assert apply_patch(obj, decision.patch) == patched
    TALLY.outcomes[f"{webhook} {_outcome(decision.allowed, decision.code)}"] += 1


def check_reply(status: int, body: bytes, sent_uid: str | None, obj: Json, webhook: str) -> None:
    """A reply of the HTTP edge to a body holding a review with `sent_uid`, or holding no
    review at all (None), which must be answered 400 (413 when too large)."""
    assert status < 500, (status, body[:500])
    if sent_uid is None or status == 413:
        assert status in (400, 413), (status, body[:500])
        TALLY.outcomes[f"HTTP {status}"] += 1
        return
    assert status == 200, (status, body[:500])
    reply = orjson.loads(body)
    assert reply["apiVersion"] == "admission.k8s.io/v1" and reply["kind"] == "AdmissionReview"
    response = reply["response"]
    assert response["uid"] == sent_uid
    code = response.get("status", {}).get("code", 200)
    assert code != 500, response
    assert len(response.get("status", {}).get("message", "")) <= MESSAGE_LIMIT
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(response["patch"])))
    TALLY.outcomes[f"HTTP {webhook} {_outcome(response['allowed'], code)}"] += 1


def _outcome(allowed: bool, code: int) -> str:
    return "allowed" if allowed else f"denied {code}"
