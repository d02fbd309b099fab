"""A pod's claims resolved: which of them, and which of its containers, get GPUs through
Dynamic Resource Allocation.

The engine never reads the cluster: the caller reads the templates and claims a review
names (``Engine.claim_sources``) and hands them in as ``ClaimObjects``. A claim whose
object was not read is not guessed at: it is ``unknown``, with the reason, and the
rules say so.

kube-scheduler allocates every claim of a pod on the node it picks, whether or not a
container uses it; a container gets the devices of the claims (or the one request of a
claim) its ``resources.claims`` names.

Claims are read through one view of which DeviceClasses give GPUs (``GpuClasses``, the
inventory's), and remember it: mutation reads a pod's claims again through the view of
the inventory it mutates with when handed them read through another (``seen_with``), so
that mutation and validation never differ on which containers hold GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import (
    ClaimAsks,
    ClaimSource,
    GpuClasses,
    claim_asks,
)
from webhook.engine.pod import Container, PodView
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

NOT_FOUND = "does not exist"


@dataclass(frozen=True)
class ClaimObjects:
    """The ResourceClaimTemplates and ResourceClaims a review names, as the cluster has
    them (as JSON), in the review's namespace."""

    found: Mapping[ClaimSource, Any] = field(default_factory=dict)
    missing: frozenset[ClaimSource] = frozenset()
    """Known not to exist (checked in the cluster, or among the files given)."""
    unreadable: Mapping[ClaimSource, str] = field(default_factory=dict)
    """Could not be read, with why."""
    looked_up: bool = True
    """False when nothing was looked up (a check of files without a cluster): a source
    not found is then not known to be missing."""

    def reason_unknown(self, source: ClaimSource) -> str:
        """Why `source` is not among `found`."""
        if source in self.unreadable:
            return f"{UNREADABLE} ({self.unreadable[source]})"
        if source in self.missing:
            return NOT_FOUND
        if self.looked_up:
            return f"{NOT_READ}: a review reads at most {MAX_SOURCES} templates and claims"
        return NOT_GIVEN


NO_CLAIMS = ClaimObjects(looked_up=False)
"""Nothing read."""
NOT_GIVEN = "was not given"
UNREADABLE = "could not be read"
NOT_READ = "was not read"


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One of the pod's claims (`spec.resourceClaims`)."""

    name: str
    source: ClaimSource | None
    asks: ClaimAsks | None
    """What it asks for; None when not known (see `problem`) or it names no source."""
    problem: str | None = None
    """Why what it asks for is not known: its object does not exist, could not be read,
    or is malformed."""

    @property
    def asks_gpus(self) -> bool:
        return self.asks is not None and self.asks.asks_gpus

    @property
    def unread(self) -> bool:
        """Whether its object was looked for but could not be read, or was past what one
        review reads: what it asks for cannot be judged, through no fault of the pod's."""
        return self.problem is not None and self.problem.startswith((UNREADABLE, NOT_READ))

    @property
    def not_looked_up(self) -> bool:
        """Whether its object was not looked for (no cluster to read it from)."""
        return self.problem == NOT_GIVEN

    def describe(self) -> str:
        named = f" ({self.source.describe()})" if self.source else ""
        return f"claim {self.name!r}{named}"


@dataclass(frozen=True)
class PodClaims:
    """The pod's claims, resolved."""

    claims: tuple[PodClaim, ...] = ()
    objects: ClaimObjects = NO_CLAIMS
    """The objects they were resolved from."""
    classes: GpuClasses | None = None
    """The view of GPU DeviceClasses they were read through; None for none yet."""

    def seen_with(self, policy: Policy, pod: PodView, classes: GpuClasses) -> PodClaims:
        """The same claims read through `classes`: themselves when they were."""
        if not self.claims or self.classes == classes:
            return self
        return pod_claims(policy, pod, self.objects, classes)

    # Plain properties, not cached ones: a PodClaims is built per review, and
    # functools.cached_property takes a lock at each first read, which cost a DRA pod's
    # review more than working the few claims out again.
    @property
    def gpu_claims(self) -> tuple[PodClaim, ...]:
        return tuple(claim for claim in self.claims if claim.asks_gpus)

    @property
    def unknown(self) -> tuple[PodClaim, ...]:
        return tuple(claim for claim in self.claims if claim.problem is not None)

    @property
    def asks_gpus(self) -> bool:
        return any(claim.asks_gpus for claim in self.claims)

    @property
    def may_ask_gpus(self) -> bool:
        """Whether some claim asks for GPUs, or is not known and so may."""
        return any(claim.asks_gpus or claim.problem is not None for claim in self.claims)

    def of(self, name: str) -> PodClaim | None:
        return next((claim for claim in self.claims if claim.name == name), None)

    def gpu_claims_of(self, container: Container) -> list[tuple[PodClaim, str | None]]:
        """The GPU claims `container` uses, each with the one request it uses (None:
        all of them); a request that gives no GPU is left out."""
        used = []
        for reference in container.claims:
            claim = self.of(reference.name)
            if claim is None or claim.asks is None:
                continue
            requests = claim.asks.gpu_requests
            if reference.request is not None:
                requests = tuple(r for r in requests if r.name == reference.request)
            if requests:
                used.append((claim, reference.request))
        return used

    def may_give_gpus(self, container: Container) -> bool:
        """Whether `container` uses a GPU claim, or a claim not known."""
        if self.gpu_claims_of(container):
            return True
        return any(
            claim is not None and claim.problem is not None
            for claim in (self.of(reference.name) for reference in container.claims)
        )


NONE = PodClaims()


def pod_claims(
    policy: Policy,
    pod: PodView,
    objects: ClaimObjects,
    classes: GpuClasses | None = None,
) -> PodClaims:
    """The claims of `pod`, resolved from `objects` and read through `classes`, the GPU
    DeviceClasses of the inventory (``DraNow.classes_for``); the policy's alone when
    None."""
    if not pod.resource_claims:
        # what else was read for the pod (the ConfigMaps its envFrom takes) stays with it
        return NONE if objects is NO_CLAIMS else PodClaims((), objects)
    view = classes or GpuClasses(policy.dra)
    resolved = []
    for name, source in pod.resource_claims.items():
        if source is None:
            resolved.append(PodClaim(name, None, None))
            continue
        obj = objects.found.get(source)
        if obj is None:
            resolved.append(PodClaim(name, source, None, objects.reason_unknown(source)))
            continue
        try:
            asks = _KEPT_ASKS.asks(view, source, obj)
        except MalformedObject as error:
            resolved.append(PodClaim(name, source, None, f"cannot be read: {error}"))
            continue
        resolved.append(PodClaim(name, source, asks))
    return PodClaims(tuple(resolved), objects, view)


class KeptAsks:
    """What claims ask, worked out once per template or claim and view of the DeviceClasses.

    The pods of a workload name the same template, whose object the edge reads afresh for
    each review; reading what it asks (its requests, their classes, the CEL selectors)
    is kept by its JSON text, the source and the view it was read through, a new view
    (an inventory change) starting over. At most ``max_answers`` are kept, of objects of
    at most ``max_key_bytes`` of JSON; larger ones, and those that cannot be read, are
    read each time."""

    def __init__(self, max_answers: int = 256, max_key_bytes: int = 16 * 1024) -> None:
        self.max_answers, self.max_key_bytes = max_answers, max_key_bytes
        self._table: tuple[GpuClasses | None, dict[tuple[ClaimSource, bytes], ClaimAsks]] = (
            None,
            {},
        )

    def asks(self, view: GpuClasses, source: ClaimSource, obj: Any) -> ClaimAsks:
        try:
            text = orjson.dumps(obj)
        except (TypeError, orjson.JSONEncodeError):
            return claim_asks(view, source, obj)
        if len(text) > self.max_key_bytes:
            return claim_asks(view, source, obj)
        seen, answers = self._table
        if seen is not view and seen != view:
            answers = {}
            self._table = (view, answers)
        key = (source, text)
        found = answers.get(key)
        if found is None:
            found = claim_asks(view, source, obj)
            if len(answers) >= self.max_answers:
                answers.clear()
            answers[key] = found
        return found


_KEPT_ASKS = KeptAsks()


def sources_named(pods: Iterable[Any]) -> tuple[ClaimSource, ...]:
    """The templates and claims the pods (or pod templates) `pods` name in
    ``spec.resourceClaims``, each once, sorted; a part of the wrong shape names nothing
    (reading the pod says what is wrong with it)."""
    found: set[ClaimSource] = set()
    for pod in pods:
        spec = pod.get("spec") if isinstance(pod, dict) else None
        claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
        for claim in claims[:MAX_POD_CLAIMS] if isinstance(claims, list) else ():
            if not isinstance(claim, dict):
                continue
            template, name = claim.get("resourceClaimTemplateName"), claim.get("resourceClaimName")
            if isinstance(template, str) and template:
                found.add(ClaimSource(TEMPLATE, template))
            elif isinstance(name, str) and name:
                found.add(ClaimSource(CLAIM, name))
    return tuple(sorted(found))


MAX_SOURCES = 64
"""Most templates and claims read for one review (``Engine.claim_sources``)."""

MAX_POD_CLAIMS = 32
"""kube-apiserver refuses a pod with more claims; a review names at most this many per pod
template, so a hostile object cannot have a thousand objects read."""
