"""The engine's answers for a pod worked out once per pod template, not once per replica.

A review's answer for a pod (what the rules find in it, the patch its mutation needs)
depends on nothing of the pod but its labels, its annotations and its spec, and, of
the rest, on the policy (one per engine) and what the cluster has now. The replicas
of a Deployment, the workers of a Job, the pods of a ReplicaSet scaled up carry the same
of each, under other names and uids; so an engine keeps each answer by the JSON text
of those three (orjson, in the pod's own order) and answers the next replica by
looking it up.

A pod that names claims is kept with the objects of its claims as the review was handed
them (read from the cluster for each review): the same template read again keeps the
answer, an edited one does not. Not kept: parts beyond JSON, and pods whose parts are
over ``max_key_bytes`` of JSON. A tenant
who sends a new pod each time only fills the table: it holds ``max_answers`` at most
and starts over when full, and over again when what the cluster has changes (another
``CapacityNow``). Answers are stored as they are handed out and must not be changed by
their callers: findings are tuples of frozen values, patches are kept as JSON text and
decoded afresh for each caller, who may apply them in place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.engine.capacity.now import CapacityNow
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.env_references import env_sources
from webhook.engine.kept import KeptAnswers
from webhook.engine.pod import PodView

MAX_ANSWERS = 512
MAX_KEY_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Glance:
    """What a pod shows before it is read: the key its answers are kept by, and what a
    review needs besides an answer kept (its labels for exemptions, its name and
    namespace for the message)."""

    key: bytes
    labels: Mapping[str, Any]
    name: str
    namespace: str


def glance(
    obj: Any, claims: ClaimObjects = NO_CLAIMS, max_key_bytes: int = MAX_KEY_BYTES
) -> Glance | None:
    """The pod (or pod template) `obj` at a glance, from its JSON as received; None when
    its answers are not to be kept, or its metadata has a shape reading it refuses.

    The key is the JSON of its labels, annotations and spec and, for each claim it names,
    what `claims` holds: the object as read, or why it was not (missing, unreadable, not
    looked up). An answer is only ever kept for a pod that was read whole; a pod with the
    same key has the same labels, annotations and spec, so it reads the same."""
    if not isinstance(obj, dict):
        return None
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        return None
    name = metadata.get("name") or metadata.get("generateName") or ""
    namespace = metadata.get("namespace")
    labels = metadata.get("labels")
    spec = obj.get("spec")
    if not isinstance(name, str) or not isinstance(spec, dict):
        return None
    try:
        key = orjson.dumps((labels, metadata.get("annotations"), spec, _named(spec, claims)))
    except (TypeError, orjson.JSONEncodeError):
        return None
    if len(key) > max_key_bytes:
        return None
    return Glance(
        key,
        labels if isinstance(labels, dict) else {},
        name,
        namespace if isinstance(namespace, str) else "",
    )


def _named(spec: dict[str, Any], claims: ClaimObjects) -> list[Any]:
    """What `claims` holds of each ConfigMap and Secret the containers of `spec` take whole
    (when anything was looked up) and of each claim `spec` names (``spec.resourceClaims``,
    as reading the pod takes them); a claim of the wrong shape names nothing here, and the pod it is
    in is refused when read, so no answer is kept for it."""
    named: list[Any] = [
        (source.kind, source.name, claims.found.get(source), claims.reason_unknown(source))
        for source in env_sources({"spec": spec})
        if claims.looked_up
    ]
    items = spec.get("resourceClaims")
    if not isinstance(items, list):
        return named
    for item in items:
        if not isinstance(item, dict):
            continue
        template, claim = item.get("resourceClaimTemplateName"), item.get("resourceClaimName")
        if template and isinstance(template, str):
            source = ClaimSource(TEMPLATE, template)
        elif claim and isinstance(claim, str):
            source = ClaimSource(CLAIM, claim)
        else:
            continue
        named.append(
            (source.kind, source.name, claims.found.get(source), claims.reason_unknown(source))
        )
    return named


def pod_key(pod: PodView, claims: ClaimObjects = NO_CLAIMS) -> bytes | None:
    """The key the answers for `pod`, as read, are kept by (see ``glance``)."""
    seen = glance(pod.raw, claims)
    return seen.key if seen is not None else None


def kept_patch(
    table: KeptAnswers[bytes],
    key: bytes | None,
    now: CapacityNow,
    work_out: Callable[[], list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    """The patch for a pod: kept as JSON text, decoded afresh for each caller."""
    if key is None:
        return work_out()
    try:
        text = table.get(key, now, lambda: orjson.dumps(work_out()))
    except (TypeError, orjson.JSONEncodeError):
        return work_out()  # a value of the pod beyond JSON carried into the patch
    patch: list[dict[str, Any]] = orjson.loads(text)
    return patch
