"""Large reviews are judged in a process of their own, one at a time.

A review of a 7 MB Deployment keeps the engine busy for seconds. On the event loop it
would hold up every other review and ``/healthz``; in a thread it still would, in part,
because the engine is pure Python and holds the GIL. Measured (``python -m
benchmarks.attack.offload``; BENCHMARKS.md) with the issue's 7 MB Deployment judged twice
in a row by the engine of the time (2.6 s each), the event loop's lag was p99 70 ms and
max 107 ms with a worker thread (30 / 138 ms with a 1 ms switch interval), and p99
3.4 ms, max 8.5 ms with a worker process. Decoding 7 MB of JSON and the collector's
passes over the object graph cannot be interrupted at all. So large bodies cross to a
worker process as bytes, are decoded and judged there, and only the encoded reply comes
back.

The worker runs at a lower CPU priority (nice 10): when the replica's CPU is short, the
event loop answering everyone else comes first and the large review waits.

One worker, judging one review at a time: a large review costs about 100 MiB at its
peak, so two at once would not fit the Deployment's 256 MiB next to the server itself.
The HTTP edge bounds how many large bodies wait for it (``webhook.http.body``).

The worker gets the engine pickled with each job, pickled once per object (a policy
reload makes a new one) and kept in the worker as long as the same bytes come. Of the
live inventory it gets what changed since the inventory it holds
(``webhook.http.inventory_updates``): the whole of it only for its first job, and when
nodes or slices come or go. A worker that dies (killed for
memory, say) fails the reviews it held, and the next large review starts a new one.

A worker that has not answered a job ``deadline_seconds`` after it was handed over
(30 s: the longest timeout kube-apiserver allows a webhook, so no caller still waits
for the answer; the largest review takes 0.7 s alone and under 10 s under attack) is
stuck, or so far behind that it is of no use: it is killed and replaced, the job
answered 503 saying so, and ``on_restart("deadline")`` told (``"died"`` for a worker
that died). Its jobs end with it, answered 503 as well.

The same worker checks the policies of ``/validate-policy`` (``check_policy``), one at a
time as the route sends them (``webhook.http.policy.route``): a process of its own would
cost its 35 MiB again under a 256 MiB limit, and in a thread a policy's YAML would hold
the event loop's GIL. A large review waits for at most the one policy being checked.

At stop, the processes are killed and the executor joined: left to the interpreter's
exit, the executor's queues were never closed, and multiprocessing's resource tracker
printed a "leaked semaphore objects" warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import pickle
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from webhook.engine import Engine
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.inventory import Inventory
from webhook.errors import GpuAdmissionError
from webhook.http.inventory_updates import (
    Held,
    InventoryUpdate,
    StaleInventory,
    applied,
    update_from,
)
from webhook.http.judging import Judged, ToRead, judge_body, refused
from webhook.http.memory import give_back, keep_large_blocks_mapped
from webhook.http.policy.verdict import PolicyQuestion, policy_verdict

log = logging.getLogger("gpu_admission.http")

WORKER_LOST = "the review worker stopped while judging this review; it is restarted"
WORKER_STUCK = "the review worker did not answer this review within {seconds:g} s; it is restarted"
DEADLINE_SECONDS = 30.0
"""The longest a job may take in the worker: kube-apiserver's longest webhook timeout."""

#: Why a worker was replaced: what ``on_restart`` is told.
DEADLINE, DIED = "deadline", "died"
RESTART_REASONS = (DEADLINE, DIED)

T = TypeVar("T")


class WorkerFailed(GpuAdmissionError):
    """The worker died, or was killed past its deadline, before answering."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ReviewWorker:
    """Judges bodies in one worker process; ``start`` it early so that the first large
    review does not wait for Python to start."""

    def __init__(
        self,
        deadline_seconds: float = DEADLINE_SECONDS,
        on_restart: Callable[[str], None] | None = None,
    ) -> None:
        self.deadline_seconds = deadline_seconds
        self.on_restart = on_restart
        self._executor: ProcessPoolExecutor | None = None
        self._pickled: dict[str, tuple[object, bytes]] = {}
        self._sent: tuple[ProcessPoolExecutor, Held] | None = None
        """The worker the last inventory was sent to, its version and the inventory."""
        self._versions = itertools.count(1)

    def start(self) -> None:
        self._running().submit(_warm)

    async def judge(
        self,
        webhook: str,
        engine: Engine,
        inventory: Inventory,
        body: bytes | bytearray,
        claims: ClaimObjects | None = NO_CLAIMS,
    ) -> Judged | ToRead:
        """``body`` judged by ``webhook`` in the worker; HTTP 503 if the worker died while
        judging it, or was killed past its deadline. A worker that died while idle is
        replaced for this review. With `claims` None, a review naming templates or claims
        comes back not judged, saying which to read (see ``judge_body``)."""
        pickled_engine = self._pickle("engine", engine)

        def job(executor: ProcessPoolExecutor) -> tuple[Any, ...]:
            update = self._update_for(executor, inventory)
            return (_judge_pickled, webhook, pickled_engine, update, body, claims)

        try:
            try:
                answered: Judged | ToRead = await self._call_with(job)
            except StaleInventory:
                self._sent = None  # never expected: the next job sends the whole
                answered = await self._call_with(job)
            return answered
        except WorkerFailed as failed:
            return refused(503, failed.message)

    def _update_for(self, executor: ProcessPoolExecutor, inventory: Inventory) -> InventoryUpdate:
        """``inventory`` as a change from the one the worker ``executor`` runs was last
        sent (whole if it was sent none); remembered as sent."""
        sent = self._sent
        held = sent[1] if sent is not None and sent[0] is executor else None
        version = next(self._versions)
        update = update_from(held, inventory, version)
        self._sent = (executor, (version, inventory))
        return update

    async def check_policy(self, question: PolicyQuestion) -> str | None:
        """``policy_verdict`` of ``question`` in the worker. Raises WorkerFailed."""
        return await self._call(policy_verdict, question)

    async def _call(self, function: Callable[..., T], *args: Any) -> T:
        result: T = await self._call_with(lambda _: (function, *args))
        return result

    async def _call_with(self, job_for: Callable[[ProcessPoolExecutor], tuple[Any, ...]]) -> Any:
        """The job ``job_for`` gives for the running worker (a function and its
        arguments), run there; a worker that died while idle is replaced, and the job
        made again for the new one."""
        for _ in range(2):
            executor = self._running()
            try:
                job: Future[Any] = executor.submit(*job_for(executor))
            except BrokenProcessPool:
                self._lost(executor, DIED)
                continue
            try:
                return await asyncio.wait_for(
                    asyncio.shield(asyncio.wrap_future(job)), self.deadline_seconds
                )
            except BrokenProcessPool:
                self._lost(executor, DIED)
                break
            except TimeoutError:
                if self._executor is executor:
                    log.error(
                        "the review worker did not answer in time; it is killed and replaced",
                        extra={"deadline_seconds": self.deadline_seconds},
                    )
                    self._lost(executor, DEADLINE)
                    _stop(executor)
                raise WorkerFailed(WORKER_STUCK.format(seconds=self.deadline_seconds)) from None
        raise WorkerFailed(WORKER_LOST)

    def _lost(self, executor: ProcessPoolExecutor, reason: str) -> None:
        if self._executor is executor:
            if reason == DIED:
                log.error("the review worker stopped; a new one starts with the next review")
            self._executor = None
            if self.on_restart is not None:
                self.on_restart(reason)

    def stop(self) -> None:
        """Stop the worker at once, even in the middle of a review (on shutdown)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            _stop(executor, wait=True)

    def _running(self) -> ProcessPoolExecutor:
        if self._executor is None:
            # spawn, not fork: the server has threads (inventory, reloaders) by then.
            context = multiprocessing.get_context("spawn")
            self._executor = ProcessPoolExecutor(
                max_workers=1, mp_context=context, initializer=_lower_priority
            )
        return self._executor

    def _pickle(self, what: str, value: object) -> bytes:
        cached = self._pickled.get(what)
        if cached is not None and cached[0] is value:
            return cached[1]
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._pickled[what] = (value, data)
        return data


def _stop(executor: ProcessPoolExecutor, wait: bool = False) -> None:
    """Kill the executor's process and stop the executor. With ``wait``, its management
    thread is joined, which closes its queues (and unlinks their semaphores) before the
    interpreter exits; the process is killed first, so that takes milliseconds."""
    processes: dict[int, Any] = getattr(executor, "_processes", None) or {}
    for process in list(processes.values()):
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    executor.shutdown(wait=wait, cancel_futures=True)


# ------------------------------------------------------------------ in the worker

_unpickled: dict[bytes, object] = {}
_held: Held | None = None
"""The inventory this worker was last sent, and its version."""


WORKER_NICENESS = 10


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def _warm() -> None:
    """Nothing: the worker has imported the engine by the time this runs."""


def _judge_pickled(
    webhook: str,
    engine: bytes,
    inventory: InventoryUpdate,
    body: bytes | bytearray,
    claims: ClaimObjects | None,
) -> Judged | ToRead:
    global _held
    current = _cached(engine)
    assert isinstance(current, Engine)
    now = applied(_held, inventory)
    _held = (inventory.version, now)
    keep_large_blocks_mapped()  # cheap, and a restarted worker needs it too
    try:
        return judge_body(webhook, current, body, now, claims)
    finally:
        give_back()  # the review's object graph is gone: hand its pages back


def _cached(data: bytes) -> object:
    """The object pickled in ``data``, unpickled again only when ``data`` changes (the
    previous one of its kind is dropped: at most one engine lives here)."""
    found = _unpickled.get(data)
    if found is None:
        found = pickle.loads(data)
        for known in [k for k, v in _unpickled.items() if type(v) is type(found)]:
            del _unpickled[known]
        _unpickled[data] = found
    return found
