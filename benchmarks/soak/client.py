"""One client process of the soak: reviews posted one after another on a kept-alive
HTTPS connection (http.client), each reply checked.

Phases, each ended at a barrier shared with the soak process: the warm-up reviews; (the
soak samples the server) the measured reviews; (the soak samples again) close. Every
request has a uid of its own; a reply must have the expected status and, when it is an
AdmissionReview, echo the uid and the expected `allowed`.
"""

from __future__ import annotations

import http.client
import ssl
import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from benchmarks.soak.payloads import Payload, request_uid, schedule, with_uid

BARRIER_SECONDS = 600.0
HEADERS = {"content-type": "application/json", "accept": "application/json"}
COUNT_EVERY = 50
"""Requests between updates of the shared progress counter."""


@dataclass(frozen=True)
class ClientArgs:
    index: int
    host: str
    port: int
    ca: str
    payloads: Sequence[Payload]
    warmup: int
    warmup_seconds: float
    """The warm-up lasts `warmup` reviews, and at least this long."""
    reviews: int


@dataclass
class ClientReport:
    index: int
    sent: list[int]
    """Per payload, requests sent."""
    wrong: list[int]
    """Per payload, replies that were not what it expects."""
    micros: list[array[int]]
    """Per payload, the latency of each measured (post-warm-up) request, in microseconds."""
    connections: int = 0
    """Connections opened: one, unless the server closed some or one failed."""
    failures: int = 0
    """Requests that got no reply even after a retry on a new connection."""
    examples: list[str] = field(default_factory=list)
    """The first few wrong replies, described."""
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Phase (`warm-up`, `measured`) -> when it started and ended (time.monotonic, which
    all processes of the machine share)."""


class Client:
    def __init__(self, args: ClientArgs) -> None:
        self.args = args
        self.context = ssl.create_default_context(cafile=args.ca)
        self.connection: http.client.HTTPSConnection | None = None
        count = len(args.payloads)
        self.report = ClientReport(
            args.index, [0] * count, [0] * count, [array("I") for _ in range(count)]
        )
        self.order = schedule([p.weight for p in args.payloads])
        self.position = (args.index * 37) % len(self.order)
        self.number = 0

    def connect(self) -> None:
        self._connection()

    def _connection(self) -> http.client.HTTPSConnection:
        if self.connection is None or self.connection.sock is None:
            if self.connection is not None:
                self.connection.close()
            self.connection = http.client.HTTPSConnection(
                self.args.host, self.args.port, context=self.context, timeout=60
            )
            self.connection.connect()
            self.report.connections += 1
        return self.connection

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def _exchange(self, path: str, body: bytes) -> tuple[int, bytes]:
        for attempt in (1, 2):
            try:
                connection = self._connection()
                connection.request("POST", path, body, HEADERS)
                reply = connection.getresponse()
                data = reply.read()
                if reply.will_close:
                    self.close()
                return reply.status, data
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def one(self, measured: bool) -> None:
        index = self.order[self.position]
        self.position = (self.position + 1) % len(self.order)
        payload = self.args.payloads[index]
        self.number += 1
        uid = request_uid(self.args.index, self.number)
        body = with_uid(payload.body, uid) if payload.is_review else payload.body
        report = self.report
        report.sent[index] += 1
        started = time.perf_counter()
        try:
            status, data = self._exchange(payload.path, body)
        except (OSError, http.client.HTTPException) as error:
            report.failures += 1
            report.wrong[index] += 1
            self._example(f"{payload.name}: no reply ({error!r})")
            return
        took = time.perf_counter() - started
        if measured:
            report.micros[index].append(min(int(took * 1e6), 2**32 - 1))
        problem = check_reply(payload, uid, status, data)
        if problem:
            report.wrong[index] += 1
            self._example(f"{payload.name}: {problem}")

    def _example(self, text: str) -> None:
        if len(self.report.examples) < 5:
            self.report.examples.append(text[:300])


def check_reply(payload: Payload, uid: str, status: int, data: bytes) -> str:
    """What is wrong with a reply to `payload` sent with `uid`; empty when nothing is."""
    if status != payload.status:
        return f"status {status}, expected {payload.status}: {data[:120]!r}"
    if not payload.is_review:
        return ""
    try:
        response: Any = orjson.loads(data)["response"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return f"not an AdmissionReview reply: {data[:120]!r}"
    if not isinstance(response, dict) or response.get("uid") != uid:
        return f"uid not echoed: {data[:120]!r}"
    if response.get("allowed") is not payload.allowed:
        return f"allowed {response.get('allowed')!r}, expected {payload.allowed}: {data[:160]!r}"
    return ""


def run_client(
    args: ClientArgs, progress: Any, phases_done: Any, barrier: threading.Barrier, results: Any
) -> None:
    """The client process: connect, barrier (all connected: the clients start together, so
    none waits idle for the others longer than the server keeps an idle connection),
    warm-up, barrier, barrier, measured reviews, barrier, barrier, close and report.
    `progress[index]` is the number of requests sent so far, `phases_done[index]` the
    number of phases done (1 after the warm-up, 2 at the end)."""
    client = Client(args)
    done = 0
    try:
        client.connect()
        barrier.wait(BARRIER_SECONDS)
        warm_until = time.monotonic() + args.warmup_seconds
        for phase, count in (("warm-up", args.warmup), ("measured", args.reviews)):
            measured = phase == "measured"
            started = time.monotonic()
            number = 0
            while number < count or (not measured and time.monotonic() < warm_until):
                client.one(measured)
                number += 1
                if number % COUNT_EVERY == 0:
                    progress[args.index] = done + number
            client.report.phases[phase] = (started, time.monotonic())
            done += number
            progress[args.index] = done
            phases_done[args.index] += 1
            barrier.wait(BARRIER_SECONDS)  # this phase done everywhere
            barrier.wait(BARRIER_SECONDS)  # the server sampled
    finally:
        client.close()
        results.put(client.report)


def phase_seconds(reports: Sequence[ClientReport], phase: str) -> float:
    """From the first client's start of `phase` to the last one's end of it."""
    spans = [r.phases[phase] for r in reports if phase in r.phases]
    if not spans:
        return 0.0
    return max(end for _, end in spans) - min(start for start, _ in spans)


def split(total: int, parts: int) -> list[int]:
    """`total` requests shared out among `parts` clients, the first ones one more."""
    base, extra = divmod(total, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]
