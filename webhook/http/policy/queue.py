"""The queue of policies to compile for ``/validate-policy``: fair between sources, each
policy compiled once however often it is sent.

Compiling a policy takes up to a third of a second (a 250 KB policy: 0.36 s), and the
route is reachable from wherever the NetworkPolicy admits (from any pod, by default).
So that a loop from one pod cannot keep an operator's `kubectl apply` waiting until its
webhook times out (the policy webhook fails open: the policy would be stored unchecked):

- a verdict is kept by the digest of what it depends on (``VerdictCache``): a loop
  sending the same policy costs a hash and a look-up, and kube-apiserver's retry of a
  review that timed out finds the verdict its first try paid for;
- the same policy sent while it is being compiled waits for that one compilation;
- policies are compiled one at a time, taking the sources in turn (round robin), so a
  review waits for at most one compilation per other source ahead of it, not for every
  policy one source has queued;
- one source has at most ``per_source`` policies waiting (two: kube-apiserver may have
  two applies under way), and all sources together ``waiting`` (eight: with the
  route's 3 s timeout, about what can be compiled in time); past either, a review is
  refused at once (``ChecksBusy``: 429 for a source over its share, 503 when the queue
  is full), with Retry-After.

A compilation goes on after its client went away: its verdict is kept for the retry.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

from webhook.errors import GpuAdmissionError
from webhook.http.policy.verdict import PolicyQuestion

Verdict = str | None
"""A denial's message, or None for a policy that serves."""

PER_SOURCE = 2
WAITING = 8
VERDICTS = 256
"""Verdicts kept: a digest and a message of at most the engine's denial length each."""


class ChecksBusy(GpuAdmissionError):
    """No room for this policy now: ``per_source`` says whether its source is over its share."""

    def __init__(self, per_source: bool) -> None:
        super().__init__("per source" if per_source else "in all")
        self.per_source = per_source


class VerdictCache:
    """The latest ``size`` verdicts by digest, the least recently used dropped first."""

    def __init__(self, size: int = VERDICTS) -> None:
        self.size = size
        self._verdicts: OrderedDict[bytes, Verdict] = OrderedDict()

    def get(self, digest: bytes) -> tuple[bool, Verdict]:
        """Whether a verdict is kept for ``digest``, and which."""
        if digest not in self._verdicts:
            return False, None
        self._verdicts.move_to_end(digest)
        return True, self._verdicts[digest]

    def put(self, digest: bytes, verdict: Verdict) -> None:
        self._verdicts[digest] = verdict
        self._verdicts.move_to_end(digest)
        while len(self._verdicts) > self.size:
            self._verdicts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._verdicts)


class PolicyChecks:
    """Compiles the policies sent to it with ``check``, one at a time, sources in turn."""

    def __init__(
        self,
        check: Callable[[PolicyQuestion], Awaitable[Verdict]],
        per_source: int = PER_SOURCE,
        waiting: int = WAITING,
        verdicts: VerdictCache | None = None,
    ) -> None:
        self.check = check
        self.per_source = per_source
        self.waiting = waiting
        self.verdicts = VerdictCache() if verdicts is None else verdicts
        self._queues: dict[str, deque[tuple[PolicyQuestion, bytes]]] = {}
        """Policies waiting, by source."""
        self._turns: dict[str, None] = {}
        """The sources with policies waiting, in the order they are served, but for the
        one being served now: it takes its next turn after those that came meanwhile."""
        self._serving: str | None = None
        self._pending: dict[bytes, asyncio.Future[Verdict]] = {}
        """What is waiting or being compiled, by digest."""
        self._waiting = 0
        self._draining: asyncio.Task[None] | None = None
        self.compiled = 0
        """Policies compiled so far (cache misses), for tests and benchmarks."""

    async def verdict(self, source: str, question: PolicyQuestion) -> Verdict:
        """The verdict on ``question`` sent from ``source``. Raises ChecksBusy, or what
        ``check`` raises."""
        digest = question.digest()
        known, verdict = self.verdicts.get(digest)
        if known:
            return verdict
        pending = self._pending.get(digest)
        if pending is None:
            pending = self._enqueue(source, question, digest)
        return await asyncio.shield(pending)

    def _enqueue(
        self, source: str, question: PolicyQuestion, digest: bytes
    ) -> asyncio.Future[Verdict]:
        queue = self._queues.get(source)
        if queue is not None and len(queue) >= self.per_source:
            raise ChecksBusy(per_source=True)
        if self._waiting >= self.waiting:
            raise ChecksBusy(per_source=False)
        future: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        # Retrieved here, so that a failure nobody waits for any more is not reported.
        future.add_done_callback(lambda done: done.cancelled() or done.exception())
        self._pending[digest] = future
        self._queues.setdefault(source, deque()).append((question, digest))
        if source != self._serving:
            self._turns.setdefault(source, None)
        self._waiting += 1
        if self._draining is None or self._draining.done():
            self._draining = asyncio.create_task(self._drain(), name="policy-checks")
        return future

    async def _drain(self) -> None:
        while self._turns:
            source = next(iter(self._turns))
            del self._turns[source]
            queue = self._queues[source]
            question, digest = queue.popleft()
            self._waiting -= 1
            self._serving = source
            future = self._pending[digest]
            try:
                verdict = await self.check(question)
            except Exception as error:
                future.set_exception(error)
            else:
                self.compiled += 1
                self.verdicts.put(digest, verdict)
                future.set_result(verdict)
            finally:
                del self._pending[digest]
                self._serving = None
                if queue:
                    self._turns[source] = None  # after the sources that came meanwhile
                else:
                    del self._queues[source]
