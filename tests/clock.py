"""A clock that moves only when a test moves it, for what takes ``clock=``."""

from __future__ import annotations


class ManualClock:
    """Returns ``now`` when called; tests set or advance ``now`` themselves."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
