"""The ResourceClaimTemplates and ResourceClaims the audited pods name, read from the cluster.

A pod claiming GPUs through Dynamic Resource Allocation is judged by what its claims
ask for, as at its CREATE (``webhook.offline.audit``), so the audit reads the objects its
claims name, as the webhook does for a review. Pods of one workload all name the same
template: each is read once per run (a cache of at most ``MAX_CACHED`` of them and
``MAX_CACHED_BYTES`` of their JSON, the least recently used dropped first, so a tenant's
large templates cannot grow the replica), each read waiting at most ``TIMEOUT_SECONDS``.

Unlike a review, which fails closed, the audit reports what it could not read and goes
on: credentials that may not ``get`` a kind (403) stop its reads for the rest of the
run, and the claims naming one not read are left unjudged (the pod is ``warned`` with
``claims-not-judged``), never guessed at or held against the pod. The reasons are the
run's ``unlisted``, by kind. A template or claim that does not exist is an answer: a pod
naming it would be refused at its CREATE today, and so would one naming an object too
large to read (``MAX_OBJECT_BYTES``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import MutableMapping
from typing import Any

import orjson

from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.kube.api_errors import (
    CLUSTER_ERRORS,
    FORBIDDEN,
    ApiException,
    cluster_error_message,
)
from webhook.kube.claims import TIMEOUT_SECONDS, ObjectTooLarge, fetch_claim_object

__all__ = ["MAX_CACHED", "MAX_CACHED_BYTES", "ClaimReads"]

log = logging.getLogger("gpu_admission.audit")

MAX_CACHED = 4096
"""Templates and claims kept once read (a few KiB each, usually)."""
MAX_CACHED_BYTES = 32 * 1024 * 1024
"""Their JSON kept at most: kube-apiserver stores objects of up to about 1.5 MiB."""

_UNREAD = object()
"""Cached for an object whose read failed: not asked for again in the run."""


class _TooLarge(str):
    """Cached for an object too large to read (``ObjectTooLarge``), with why: a pod naming
    it would be refused at its CREATE today, and so is judged."""


class ClaimReads:
    """Reads the objects audited pods name, each once; called as ``claims_of`` by
    ``webhook.offline.audit.judge_object``."""

    def __init__(
        self,
        api: Any,
        not_read: MutableMapping[str, str],
        *,
        timeout: float = TIMEOUT_SECONDS,
        max_cached: int = MAX_CACHED,
        max_cached_bytes: int = MAX_CACHED_BYTES,
    ) -> None:
        self._api = api
        self._not_read = not_read
        """Kind -> why objects of it could not be read (the run's ``unlisted``)."""
        self._timeout = timeout
        self._max_cached, self._max_cached_bytes = max_cached, max_cached_bytes
        self._known: OrderedDict[tuple[str, ClaimSource], tuple[Any, int]] = OrderedDict()
        """What each read gave, with the size of its JSON."""
        self._cached_bytes = 0
        self._forbidden: set[str] = set()
        self.reads = 0
        """Reads asked of kube-apiserver so far."""

    def __call__(self, namespace: str, sources: tuple[ClaimSource, ...]) -> ClaimObjects:
        found: dict[ClaimSource, Any] = {}
        missing: set[ClaimSource] = set()
        too_large: dict[ClaimSource, str] = {}
        all_read = True
        for source in sources:
            known = self._read(namespace, source)
            if known is _UNREAD:
                all_read = False
            elif known is None:
                missing.add(source)
            elif isinstance(known, _TooLarge):
                too_large[source] = str(known)
            else:
                found[source] = known
        return ClaimObjects(
            found=found, missing=frozenset(missing), unreadable=too_large, looked_up=all_read
        )

    def _read(self, namespace: str, source: ClaimSource) -> Any:
        key = (namespace, source)
        if key in self._known:
            self._known.move_to_end(key)
            return self._known[key][0]
        if source.kind in self._forbidden:
            return _UNREAD
        self.reads += 1
        try:
            known: Any = fetch_claim_object(self._api, namespace, source, timeout=self._timeout)
        except ObjectTooLarge as error:
            known = _TooLarge(error)
        except CLUSTER_ERRORS as error:
            known = _UNREAD
            self._failed(namespace, source, error)
        self._keep(key, known)
        return known

    def _keep(self, key: tuple[str, ClaimSource], known: Any) -> None:
        size = len(orjson.dumps(known)) if isinstance(known, dict) else 0
        if size > self._max_cached_bytes:
            return  # used for this pod, read again for the next
        self._known[key] = (known, size)
        self._cached_bytes += size
        while len(self._known) > self._max_cached or self._cached_bytes > self._max_cached_bytes:
            _, (_, dropped) = self._known.popitem(last=False)
            self._cached_bytes -= dropped

    def _failed(self, namespace: str, source: ClaimSource, error: Exception) -> None:
        if isinstance(error, ApiException) and error.status == FORBIDDEN:
            self._forbidden.add(source.kind)
        reason = cluster_error_message(error, self._api.configuration.host)
        self._not_read.setdefault(
            source.kind, f"could not be read ({reason}); the claims naming one are not judged"
        )
        log.warning(
            "audit: a claim's object could not be read",
            extra={"namespace": namespace, "object": source.describe(), "reason": reason},
        )
