"""The templates and claims the pods under review name, read from the cluster.

The engine says which it needs (``Engine.claim_sources``: none for a pod without claims,
so ordinary pods cost nothing here); each is read by a blocking call in a worker thread,
all at once, and the whole read is given up on after ``seconds``. The reads of all
reviews share ``CONCURRENT_READS`` threads of their own, so pods naming dozens of
templates each can hold up other claiming pods (up to the bounded wait) but never the
threads the reads of autoscalers' targets run on. What could not be
read in time, or failed, is handed to the engine as unreadable with the reason, and
the engine refuses the pod with it (webhooks fail closed): it never guesses what a
claim asks for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from webhook.engine import AdmissionRequest, Engine
from webhook.engine.binding import BOUND_POD
from webhook.engine.dra.api import TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.env_references import CONFIG_MAP, SECRET
from webhook.http.recent_templates import RecentTemplates

log = logging.getLogger("gpu_admission.http")

LARGE_KINDS = frozenset({BOUND_POD, CONFIG_MAP, SECRET})
"""Objects of up to about 1.5 MiB as stored, read with the pods' few threads."""

ReadClaim = Callable[[str, ClaimSource], Mapping[str, Any] | None]
"""Reads one template or claim of a namespace (a blocking call); None when it does not exist."""

CONCURRENT_READS = 16
"""Reads in flight at once, for all reviews together (the thread pool's other 40 threads
stay for the rest): a review names at most 64, and a read takes milliseconds."""

CONCURRENT_POD_READS = 4
"""Pods read at once for their bindings, apart from the claims: a pod can be a thousand
times larger than a claim (up to 1.5 MiB as stored), so a tenant's large pods being
scheduled hold a few MiB here, never sixteen of them, and never the claims' reads."""


@dataclass
class ClaimReader:
    read: ReadClaim
    seconds: float
    _threads: anyio.CapacityLimiter | None = field(default=None, init=False, repr=False)
    """Made on first use: an anyio limiter needs a running event loop."""

    _pod_threads: anyio.CapacityLimiter | None = field(default=None, init=False, repr=False)

    recent: RecentTemplates = field(default_factory=RecentTemplates)
    """Templates found in the last second, handed to the reviews that name them again
    (never to a binding's, which reads afresh)."""

    recent_keys: RecentTemplates = field(default_factory=RecentTemplates)
    """The key names of ConfigMaps and Secrets found in the last second, so that the
    replicas of one template, created together, cost one read of each: a key written
    since is judged at its write (``webhook.engine.env_keys``)."""

    def _recent_of(self, source: ClaimSource) -> tuple[RecentTemplates, str] | None:
        """Where `source` is kept when found, and under which name; None if it is not."""
        if source.kind == TEMPLATE:
            return self.recent, source.name
        if source.kind in (CONFIG_MAP, SECRET):
            return self.recent_keys, f"{source.kind}/{source.name}"
        return None

    def _limiter_of(self, source: ClaimSource) -> anyio.CapacityLimiter:
        if source.kind in LARGE_KINDS:
            if self._pod_threads is None:
                self._pod_threads = anyio.CapacityLimiter(CONCURRENT_POD_READS)
            return self._pod_threads
        if self._threads is None:
            self._threads = anyio.CapacityLimiter(CONCURRENT_READS)
        return self._threads

    async def objects(
        self, engine: Engine, request: AdmissionRequest, handler: str | None = None
    ) -> ClaimObjects:
        """The objects of the claims the pods of `request` (sent to the webhook named
        `handler`, when known) name; NO_CLAIMS when they name none. A pod's binding
        names its pod first and the pod its claims: what the engine asks for once the
        first round is read comes in a second, within the same ``seconds`` in all."""
        sources = engine.claim_sources(request, handler=handler)
        if not sources:
            return NO_CLAIMS
        deadline = time.monotonic() + self.seconds
        fresh = engine.reads_afresh(request, handler)
        read = await self.read_all(request.namespace, sources, request.uid, fresh=fresh)
        more = tuple(s for s in engine.claim_sources(request, read, handler) if s not in sources)
        if not more:
            return read
        left = max(deadline - time.monotonic(), 0.0)
        then = await self.read_all(request.namespace, more, request.uid, left, fresh=fresh)
        return _merged(read, then)

    async def read_all(
        self,
        namespace: str,
        sources: tuple[ClaimSource, ...],
        uid: str = "",
        seconds: float | None = None,
        *,
        fresh: bool = False,
    ) -> ClaimObjects:
        """Each of `sources` in `namespace`, read at once, waiting at most `seconds`
        (``seconds`` when None); a template found in the last second as it was then,
        unless `fresh`."""
        seconds = self.seconds if seconds is None else seconds
        found: dict[ClaimSource, Any] = {}
        if not fresh:
            for source in sources:
                kept = self._recent_of(source)
                if kept is not None and (recent := kept[0].get(namespace, kept[1])) is not None:
                    found[source] = recent
        reads = {
            source: asyncio.ensure_future(
                anyio.to_thread.run_sync(
                    self.read, namespace, source, limiter=self._limiter_of(source)
                )
            )
            for source in sources
            if source not in found
        }
        if reads:
            await asyncio.wait(reads.values(), timeout=seconds)
        missing: set[ClaimSource] = set()
        unreadable: dict[ClaimSource, str] = {}
        for source, read in reads.items():
            if not read.done():
                read.cancel()  # the thread runs on until its own timeout; its answer is dropped
                unreadable[source] = f"no answer from the cluster within {seconds:g} s"
            elif (error := read.exception()) is not None:
                unreadable[source] = _reason(error)
            elif read.result() is None:
                missing.add(source)
            else:
                found[source] = read.result()
                if (kept := self._recent_of(source)) is not None:
                    kept[0].keep(namespace, kept[1], found[source])
        if unreadable:
            log.warning(
                "cannot read the objects a pod names",
                extra={
                    "uid": uid,
                    "namespace": namespace,
                    "reasons": {source.describe(): why for source, why in unreadable.items()},
                },
            )
        return ClaimObjects(found=found, missing=frozenset(missing), unreadable=unreadable)


def _merged(first: ClaimObjects, then: ClaimObjects) -> ClaimObjects:
    return ClaimObjects(
        found={**first.found, **then.found},
        missing=first.missing | then.missing,
        unreadable={**first.unreadable, **then.unreadable},
    )


def _reason(error: BaseException) -> str:
    """The first line of what went wrong, short enough for a denial."""
    lines = str(error).strip().splitlines()
    return lines[0][:200] if lines else type(error).__name__
