"""What ``/readyz`` reports: named checks, each saying whether its part is ready and why."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Readiness:
    """What `/readyz` reports; later parts of the service add their checks here."""

    checks: dict[str, Callable[[], tuple[bool, str]]] = field(default_factory=dict)

    def report(self) -> tuple[bool, dict[str, Any]]:
        details = {}
        ready = True
        for name, check in self.checks.items():
            try:
                ok, detail = check()
            except Exception as error:  # a broken check means not ready, never a 500
                ok, detail = False, f"check failed: {error!r}"
            ready = ready and ok
            details[name] = {"ok": ok, "detail": detail}
        return ready, details
