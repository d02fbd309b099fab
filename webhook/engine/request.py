"""What the engine needs to know of an admission request, independent of its wire form."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    uid: str
    operation: str
    """CREATE, UPDATE, DELETE or CONNECT."""
    group: str
    version: str
    kind: str
    resource: str
    subresource: str
    namespace: str
    name: str
    object: Any
    """The object as received (CREATE, UPDATE); a plain mapping, never a model."""
    old_object: Any = None
    dry_run: bool = False

    @property
    def is_pod(self) -> bool:
        return self.group == "" and self.kind == "Pod"

    @property
    def is_pod_create(self) -> bool:
        return self.is_pod and self.operation == "CREATE" and not self.subresource

    @property
    def is_ephemeral_containers_update(self) -> bool:
        return self.is_pod and self.subresource == "ephemeralcontainers"
