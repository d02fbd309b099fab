"""Exceptions of gpu-admission: one tree, whose root is ``GpuAdmissionError``.

    GpuAdmissionError          base of everything raised on purpose
    ├── PolicyError            a policy file that cannot be loaded or compiled;
    │                          carries the problems found (PolicyProblem: the
    │                          file, line and column, field path and reason), up
    │                          to a cap, and a count of the others
    ├── MalformedObject        an object in a review that is not shaped like the
    │                          Kubernetes kind it claims to be (spec a list,
    │                          containers null, quantities of a wrong type)
    └── each wing's own, defined beside what raises it: a review that is not one
        (``http.review.InvalidReview``), a body over its bounds (``http.body``), a
        worker lost (``http.offload.WorkerFailed``), a watch expired or failed
        (``kube.reflector``), an object too large to read (``kube.reads``), bad
        credentials (``kube.credentials``), an install or a rotation that cannot go
        on (``install.plan.InstallError``, ``tls.rotation.RotationError``), a
        manifest that cannot be read (``offline.documents.ManifestError``), two
        webhooks under one name (``engine.handlers.HandlerConflict``), ...; those that
        were a ``ValueError`` or a ``YAMLError`` still are

Everything else escaping the engine is a bug: the HTTP edge turns it into a
denial with code 500 and logs it with the request uid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class GpuAdmissionError(Exception):
    """Base class of the errors gpu-admission raises on purpose."""


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    """One thing wrong with a policy: where (file, line and column when known, field path)
    and why. Its text is `file:line: path: reason`."""

    source: str
    path: str
    reason: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        return f"{where}: {self.path}: {self.reason}" if self.path else f"{where}: {self.reason}"


class PolicyError(GpuAdmissionError):
    """A policy that cannot be used, with the problems found in it, each on a line of its
    text. ``source``, ``path`` and ``reason`` are the first problem's. ``unlisted``
    counts the problems found past the loader's cap and not carried."""

    def __init__(
        self,
        source: str,
        path: str = "",
        reason: str = "",
        *,
        line: int | None = None,
        column: int | None = None,
        problems: Sequence[PolicyProblem] = (),
        unlisted: int = 0,
    ) -> None:
        self.problems = tuple(problems) or (PolicyProblem(source, path, reason, line, column),)
        self.unlisted = unlisted
        first = self.problems[0]
        self.source, self.path, self.reason, self.line = (
            first.source,
            first.path,
            first.reason,
            first.line,
        )
        lines = [str(problem) for problem in self.problems]
        if unlisted:
            lines.append(f"{first.source}: and {unlisted:,} more problems")
        super().__init__("\n".join(lines))

    @property
    def count(self) -> int:
        """How many problems were found, listed or not."""
        return len(self.problems) + self.unlisted

    @classmethod
    def of(cls, problems: Sequence[PolicyProblem], unlisted: int = 0) -> PolicyError:
        """The error carrying `problems` (at least one), `unlisted` others counted."""
        first = problems[0]
        return cls(first.source, problems=problems, unlisted=unlisted)


class MalformedObject(GpuAdmissionError):
    """An admitted object whose shape Kubernetes itself would not accept."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
