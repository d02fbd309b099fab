"""ResourceClaimTemplates read in the last second, shared by the reviews that name them.

A pod claiming its GPU through a template costs two reads of it from kube-apiserver:
one at ``/mutate``, one at ``/validate``, milliseconds apart; and a Deployment's replicas
each cost two more of the same template. Measured through kube-apiserver
(BENCHMARKS.md, ``ours-dra``), those reads were 4.5 ms of the replica's CPU per pod
and 3.5 ms of kube-apiserver's. A template read is kept for ``KEPT_SECONDS`` and
handed to the reviews of its namespace that name it meanwhile.

Why a second is safe: what admission judges of a template is already a view of a moment.
The claim a pod gets is made from the template later, by the resource claim controller,
from the template as it is then; a template changed after the pod was admitted is caught
at the scheduler's binding, which reads the claim made (or the template) afresh and is
never served from here (``webhook.engine.binding``). A template kept one second longer
widens that window by a second, no more. Only templates found are kept: one not found
(created right after the pod, say) is read again at the next review.

Bounds: at most ``MOST_KEPT`` templates, each at most 128 KiB as read
(``webhook.kube.claims``), 8 MiB in all; the oldest goes first. Kept by namespace and
name, a template is only ever handed to reviews of its own namespace. Used on the event
loop only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["KEPT_SECONDS", "MOST_KEPT", "RecentTemplates"]

KEPT_SECONDS = 1.0
MOST_KEPT = 64


class RecentTemplates:
    """Templates found in the last ``seconds``, by namespace and name."""

    def __init__(
        self,
        seconds: float = KEPT_SECONDS,
        most: int = MOST_KEPT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.most = most
        self._clock = clock
        self._kept: OrderedDict[tuple[str, str], tuple[float, Any]] = OrderedDict()

    def get(self, namespace: str, name: str) -> Any | None:
        """The template as read less than ``seconds`` ago; None if it was not."""
        key = (namespace, name)
        kept = self._kept.get(key)
        if kept is None:
            return None
        read_at, template = kept
        if self._clock() - read_at >= self.seconds:
            del self._kept[key]
            return None
        return template

    def keep(self, namespace: str, name: str, template: Any) -> None:
        """``template``, just read, for the reviews of the next ``seconds``."""
        key = (namespace, name)
        self._kept.pop(key, None)
        self._kept[key] = (self._clock(), template)
        while len(self._kept) > self.most:
            self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
