"""Polling until a condition holds, with a message that says what never happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not hold in time. An AssertionError so pytest shows it as a
    test failure with the message, not as a crash in the harness."""


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = 0.2,
    describe_last: Callable[[], str] | None = None,
) -> T:
    """Call ``predicate`` until it returns something truthy and return that.

    ``what`` completes the sentence "timed out after Ns waiting for ...".
    ``describe_last`` may add what the world looked like at the end, which is
    usually what one needs to see to understand the failure.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            detail = f"\n{describe_last()}" if describe_last is not None else ""
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {what}{detail}")
        time.sleep(interval)
