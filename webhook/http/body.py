"""Reading a request body within a bounded amount of memory.

Two bounds. Each body is capped (``max_bytes``, answered 413). Bodies over
``small_bytes`` also draw on a budget shared by every connection (``BodyBudget``), held
until the review is answered: a hundred clients that each declare 6.5 MiB and stall
cannot make the server hold 650 MiB; the ones past the budget are answered 503 at once
and their connection closed. Small bodies (ordinary pods) never wait for the budget;
what they can hold is bounded by the number of connections (``webhook.http.limits``).

A body of declared length is read into one buffer of exactly that size: one allocation,
which the C allocator maps on its own for large sizes and gives back to the system
when it is freed, instead of many chunks that leave a fragmented heap behind them; and
once a large body is let go, the heap is trimmed (``webhook.http.memory``).
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import ClientDisconnect, Request

MIB = 1024 * 1024


class BodyTooLarge(Exception):
    """The body is over the cap (HTTP 413)."""


class BodyBudgetSpent(Exception):
    """Too many large bodies are held at once (HTTP 503)."""


class BodyBudget:
    """Bytes of large bodies the service holds at once, over all connections."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def reserve(self, size: int) -> None:
        if self.held + size > self.limit:
            raise BodyBudgetSpent
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size


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

    Raises BodyTooLarge, BodyBudgetSpent, or starlette's ClientDisconnect when the
    client goes away first.
    """
    return ReceivedBody(request, _Reservation(limits))


class ReceivedBody:
    """The context of ``received_body``: a class, as a generator-based context manager
    cost every review an async generator and the event loop's bookkeeping of it."""

    def __init__(self, request: Request, reservation: _Reservation) -> None:
        self.request = request
        self.reservation = reservation

    async def __aenter__(self) -> bytearray:
        declared = _declared_length(self.request)
        if declared is not None and declared > self.reservation.limits.max_bytes:
            raise BodyTooLarge
        try:
            if declared is not None:
                self.reservation.grow_to(declared)
                return await _read_exactly(self.request, declared)
            return await _read_growing(self.request, self.reservation)
        except BaseException:
            self.reservation.release()
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self.reservation.release()


class _Reservation:
    def __init__(self, limits: BodyLimits) -> None:
        self.limits = limits
        self.held = 0

    def grow_to(self, size: int, step: int = 1) -> None:
        """Hold at least ``size`` bytes of a large body, reserving ``step`` at a time."""
        if size > self.limits.max_bytes:
            raise BodyTooLarge
        if size <= self.limits.small_bytes or size <= self.held:
            return
        wanted = min(max(size, self.held + step), self.limits.max_bytes)
        self.limits.budget.reserve(wanted - self.held)
        self.held = wanted

    def release(self) -> None:
        """Hand the reservation back. The heap pages follow with the server's periodic
        trim, in a thread: trimming here, on the event loop, would cost every large body
        milliseconds of everyone's time on a fragmented heap."""
        if self.held:
            self.limits.budget.release(self.held)
            self.held = 0


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
