"""Outcomes of a review, as values. Only the HTTP edge turns them into wire form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    """A stable rule name, e.g. `gpu-count`, for metrics, logs and policy modes."""
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    code: int = 200
    message: str = ""
    patch: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    violations: tuple[Violation, ...] = field(default=())


def allow(patch: list[dict[str, Any]] | None = None) -> Decision:
    return Decision(allowed=True, patch=tuple(patch or ()))


def deny(violations: list[Violation], subject: str) -> Decision:
    message = f"{subject}: " + "; ".join(v.message for v in violations)
    return Decision(allowed=False, code=403, message=message, violations=tuple(violations))


def malformed(reason: str) -> Decision:
    return Decision(allowed=False, code=400, message=f"malformed object: {reason}")
