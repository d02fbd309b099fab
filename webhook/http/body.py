"""Reading a request body within a bounded amount of memory.

Two bounds. Each body is capped (``max_bytes``, answered 413). Bodies over
``small_bytes`` also draw on a budget shared by every connection (``BodyBudget``), held
until the review is answered: a hundred clients that each declare 6.5 MiB and stall
cannot make the server hold 650 MiB; the ones past the budget are answered 503 at once
and their connection closed. Small bodies (ordinary pods) never wait for the budget;
what they can hold is bounded by the number of connections (``webhook.http.limits``).

The budget is kube-apiserver's first, in two ways:

- **a share per source address**: one address holds at most ``per_source`` bytes of it
  (half, by default: one body of the largest size), so one pod cannot hold all of it,
  past which its next large body is answered 503 at once. kube-apiserver is one source
  among the others (or a few, one per apiserver); a NetworkPolicy admitting only its
  addresses (deploy/README.md) is what keeps many pods out together;
- **stalled bodies give way**: when a large body finds the budget spent, bodies still
  arriving ``stalled_seconds`` after their head (1 s; kube-apiserver sends a review in
  one go, 7 MiB in milliseconds) are cut off, the longest-arriving first, their
  connections answered 408, and their bytes go to the body that came whole. Three
  uploads that declare 6.5 MiB and stop short can no longer refuse kube-apiserver's
  large reviews for the 10 s of their body timeout.

A body of declared length is read into one buffer of exactly that size: one allocation,
which the C allocator maps on its own for large sizes and gives back to the system
when it is freed, instead of many chunks that leave a fragmented heap behind them; and
once a large body is let go, the heap is trimmed (``webhook.http.memory``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from starlette.requests import ClientDisconnect, Request

from webhook.errors import GpuAdmissionError

MIB = 1024 * 1024

STALLED_SECONDS = 1.0
"""How long a large body may still be arriving before it gives way to one that came whole."""

BUSY = (
    "gpu-admission holds as many large reviews as it can at once; "
    "try again in a few seconds, or send a smaller object"
)
BUSY_FROM_SOURCE = (
    "gpu-admission holds as many large reviews from this address as it lets one address "
    "have at once; try again in a few seconds"
)


class BodyRefused(GpuAdmissionError):
    """A body the service will not hold: ``status`` is the HTTP status that answers it and
    ``reply`` the sentence its reply carries."""

    status = 500
    reply = ""


class BodyTooLarge(BodyRefused):
    """The body is over the cap (HTTP 413)."""

    status = 413

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"request body exceeds {max_bytes} bytes")
        self.reply = str(self)


class BodyBudgetSpent(BodyRefused):
    """Too many large bodies are held at once (HTTP 503), or too many from this source."""

    status = 503

    def __init__(self, per_source: bool = False) -> None:
        super().__init__("per source" if per_source else "in all")
        self.per_source = per_source
        self.reply = BUSY_FROM_SOURCE if per_source else BUSY


class BodyStalled(BodyRefused):
    """The body was still arriving when a whole one needed its room (HTTP 408)."""

    status = 408
    reply = "request body still arriving when a whole one needed its room"


class BodyBudget:
    """Bytes of large bodies the service holds at once, over all connections, and what
    each source address holds of them."""

    def __init__(
        self,
        limit: int,
        per_source: int | None = None,
        stalled_seconds: float = STALLED_SECONDS,
    ) -> None:
        self.limit = limit
        self.per_source = limit if per_source is None else per_source
        self.stalled_seconds = stalled_seconds
        self.held = 0
        self.by_source: dict[str, int] = {}
        self._arriving: dict[_Reservation, None] = {}
        """Reservations whose body is still arriving, the earliest first."""

    def reserve(self, reservation: _Reservation, size: int) -> None:
        source = reservation.source
        if self.by_source.get(source, 0) + size > self.per_source:
            raise BodyBudgetSpent(per_source=True)
        if self.held + size > self.limit:
            self._make_room(self.held + size - self.limit, reservation)
            if self.held + size > self.limit:
                raise BodyBudgetSpent
        self.held += size
        self.by_source[source] = self.by_source.get(source, 0) + size

    def release(self, reservation: _Reservation, size: int) -> None:
        self.held -= size
        left = self.by_source.get(reservation.source, 0) - size
        if left > 0:
            self.by_source[reservation.source] = left
        else:
            self.by_source.pop(reservation.source, None)
        self._arriving.pop(reservation, None)

    def arriving(self, reservation: _Reservation) -> None:
        self._arriving.setdefault(reservation, None)

    def arrived(self, reservation: _Reservation) -> None:
        self._arriving.pop(reservation, None)

    def _make_room(self, wanted: int, claimant: _Reservation) -> None:
        """Cut off bodies arriving for longer than ``stalled_seconds``, the earliest
        first, until ``wanted`` bytes are free or none is left."""
        cutoff = time.monotonic() - self.stalled_seconds
        stalled = [r for r in self._arriving if r is not claimant and r.arriving_since <= cutoff]
        freed = 0
        for reservation in stalled:
            if freed >= wanted:
                break
            freed += reservation.held
            reservation.evict()


@dataclass(frozen=True)
class BodyLimits:
    max_bytes: int
    """The largest body answered at all."""
    small_bytes: int
    """Bodies up to this size are read without drawing on the budget."""
    budget: BodyBudget


def received_body(request: Request, limits: BodyLimits) -> ReceivedBody:
    """The whole body (``async with received_body(...) as body``), its share of the
    budget held until the block ends.

    Raises a ``BodyRefused`` (BodyTooLarge, BodyBudgetSpent, BodyStalled: cut off for a
    body that came whole), or starlette's ClientDisconnect when the client goes away
    first.
    """
    return ReceivedBody(request, _Reservation(limits, source_address(request)))


class ReceivedBody:
    """The context of ``received_body``: a class, as a generator-based context manager
    cost every review an async generator and the event loop's bookkeeping of it."""

    def __init__(self, request: Request, reservation: _Reservation) -> None:
        self.request = request
        self.reservation = reservation

    async def __aenter__(self) -> bytearray:
        declared = _declared_length(self.request)
        reservation = self.reservation
        if declared is not None and declared > reservation.limits.max_bytes:
            raise BodyTooLarge(reservation.limits.max_bytes)
        try:
            if declared is not None:
                reservation.grow_to(declared)
                body = await _read_exactly(self.request, declared)
            else:
                body = await _read_growing(self.request, reservation)
        except asyncio.CancelledError:
            reservation.release()
            if reservation.evicted and reservation.uncancel() == 0:
                raise BodyStalled from None
            raise
        except BaseException:
            reservation.release()
            raise
        reservation.arrived()
        return body

    async def __aexit__(self, *exc_info: object) -> None:
        self.reservation.release()


class _Reservation:
    """What one body holds of the budget, and the means to cut it off while it arrives."""

    def __init__(self, limits: BodyLimits, source: str = "") -> None:
        self.limits = limits
        self.source = source
        self.held = 0
        self.arriving_since = 0.0
        self.evicted = False
        self._task: asyncio.Task[object] | None = None

    def grow_to(self, size: int, step: int = 1) -> None:
        """Hold at least ``size`` bytes of a large body, reserving ``step`` at a time."""
        if size > self.limits.max_bytes:
            raise BodyTooLarge(self.limits.max_bytes)
        if size <= self.limits.small_bytes or size <= self.held:
            return
        wanted = min(max(size, self.held + step), self.limits.max_bytes)
        budget = self.limits.budget
        budget.reserve(self, wanted - self.held)
        if not self.held:
            self.arriving_since = time.monotonic()
            self._task = asyncio.current_task()
            budget.arriving(self)
        self.held = wanted

    def arrived(self) -> None:
        if self.held:
            self.limits.budget.arrived(self)

    def evict(self) -> None:
        """Give the bytes back now and stop the reading of the body (``BodyStalled``)."""
        self.evicted = True
        self.release()
        if self._task is not None:
            self._task.cancel()

    def uncancel(self) -> int:
        """Undo the cancellation ``evict`` asked for (``Task.uncancel``)."""
        return 0 if self._task is None else self._task.uncancel()

    def release(self) -> None:
        """Hand the reservation back. The heap pages follow with the server's periodic
        trim, in a thread: trimming here, on the event loop, would cost every large body
        milliseconds of everyone's time on a fragmented heap."""
        if self.held:
            self.limits.budget.release(self, self.held)
            self.held = 0


def source_address(request: Request) -> str:
    """The address the request came from ("" when the server does not say)."""
    client = request.scope.get("client")
    return str(client[0]) if client else ""


def _declared_length(request: Request) -> int | None:
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


async def _read_exactly(request: Request, size: int) -> bytearray:
    """The body's messages read as ``Request.stream`` reads them (a disconnect raises
    ClientDisconnect), without its async generator."""
    # The HTTP parser never hands over more than the declared length.
    body = bytearray(size)
    filled = 0
    while True:
        message = await request.receive()
        if message["type"] == "http.request":
            chunk = message.get("body", b"")
            body[filled : filled + len(chunk)] = chunk
            filled += len(chunk)
            if not message.get("more_body", False):
                return body
        elif message["type"] == "http.disconnect":
            raise ClientDisconnect


async def _read_growing(request: Request, reservation: _Reservation) -> bytearray:
    body = bytearray()
    async for chunk in request.stream():
        reservation.grow_to(len(body) + len(chunk), step=MIB)
        body += chunk
    return body
