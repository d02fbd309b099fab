"""Exceptions of gpu-admission.

    GpuAdmissionError          base of everything raised on purpose
    ├── PolicyError            a policy file that cannot be loaded or compiled;
    │                          carries the file, the field path and the reason
    └── MalformedObject        an object in a review that is not shaped like the
                               Kubernetes kind it claims to be (spec a list,
                               containers null, quantities of a wrong type)

Everything else escaping the engine is a bug: the HTTP edge turns it into a
denial with code 500 and logs it with the request uid.
"""

from __future__ import annotations


class GpuAdmissionError(Exception):
    """Base class of the errors gpu-admission raises on purpose."""


class PolicyError(GpuAdmissionError):
    """A policy that cannot be used, with where and why."""

    def __init__(self, source: str, path: str, reason: str) -> None:
        self.source = source
        self.path = path
        self.reason = reason
        where = f"{source}: {path}" if path else source
        super().__init__(f"{where}: {reason}")


class MalformedObject(GpuAdmissionError):
    """An admitted object whose shape Kubernetes itself would not accept."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
