"""The audit of what already runs: list, judge, add up. `gpu-admission audit` and `serve` share it.

The namespaces audited are those the webhooks cover: the ones carrying the policy's
opt-in label, or with ``all_namespaces`` every one they could cover (a preview of a
rollout), never kube-system, kube-node-lease or the service's own (``service_namespace``:
the one it runs in, which the webhooks' namespaceSelector exempts whatever its name;
``webhook.service.namespace`` finds it in a replica). Every kind the engine judges at
apply time is listed (Pods, the built-in controllers and the policy's workload kinds),
page by page and judged as it comes (``webhook.offline.audit``): across the cluster for
``all_namespaces``; otherwise each kind is first counted across the cluster in one
request, and listed not at all when there is none, across the cluster when it has few,
or in each opted-in namespace by its namespaced calls (``webhook.service.where_listed``).
A kind the cluster does not serve is skipped, one the credentials may not list is
reported in ``unlisted``. The ResourceClaimTemplates and ResourceClaims pods name are
read as they are met (``audit_claims``), when the cluster serves ``resource.k8s.io/v1``.
Capacity rules judge against the Nodes and PriorityClasses as they are
(``inventory``), read once when not given, with the ResourceSlices and DeviceClasses
when a pool of the policy takes GPUs through DRA (credentials that may not list them
leave those pools to the policy's figures, said in ``unlisted``).

Memory is bounded by design, whatever tenants store: each list response is parsed as
it arrives, one object at a time (``webhook.kube.listing``), and dropped once judged,
so a run holds one object, the counts, and per object of a kind that may own others
its identity as an owner (``Owner``: four short strings). An object over the listing's
cap is not parsed but reported too large to be judged. Pages are of
``AUDIT_PAGE_SIZE`` objects, for kube-apiserver's sake: it builds each page whole.

A workload is left to its controller only when that owner exists (``OwnerCheck``).
Kinds are listed owners first (ReplicaSets and Jobs, the kinds usually owned, last), and
each listed object of a kind other than Pod is remembered as an owner. A workload whose
controller was seen is left to it; one whose controller is of a kind not yet listed is
deferred, by name only; one whose controller's kind was listed without it (a uid that
does not exist, a kind the cluster does not serve or the credentials may not list) is
judged. At the end each deferred workload whose owner never appeared is read again by
name and judged.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from webhook.engine import Engine, kueue_flavors
from webhook.engine.dra.api import GROUP as DRA_GROUP
from webhook.engine.dra.api import VERSION as DRA_VERSION
from webhook.engine.inventory import Inventory
from webhook.engine.pod_security import below_baseline
from webhook.engine.templates import POD, TemplateKind
from webhook.install.configurations import ALWAYS_EXEMPT_NAMESPACES
from webhook.kube.api_errors import (
    CLUSTER_ERRORS,
    ApiException,
    api_error_message,
    cluster_error_message,
)
from webhook.kube.listing import (
    Listed,
    TooLarge,
    list_cluster_objects,
    list_kind,
    namespace_labels,
    namespaces_in_scope,
    preferred_versions,
    read_dra_inventory,
    read_inventory,
    read_object,
)
from webhook.offline.audit import (
    AuditSummary,
    ClaimsOf,
    Finding,
    Owner,
    as_owner,
    judge_object,
    judged_owner,
    subject_named,
    too_large,
)
from webhook.service.audit_claims import ClaimReads
from webhook.service.inventory import inventory_label_keys, takes_dra_gpus
from webhook.service.where_listed import where_to_list

__all__ = [
    "AuditRun",
    "OwnerCheck",
    "audit_cluster",
    "namespaces_to_audit",
    "never_audited",
    "out_of_scope",
    "owners_first",
]

log = logging.getLogger("gpu_admission.audit")

ListedCount = Callable[[TemplateKind, int], None]

USUALLY_OWNED = frozenset({("apps", "ReplicaSet"), ("batch", "Job")})
"""Kinds whose objects usually have a controller of a judged kind: listed last."""


@dataclass
class AuditRun:
    namespaces: tuple[str, ...]
    summary: AuditSummary = field(default_factory=AuditSummary)
    findings: list[Finding] = field(default_factory=list)
    """The findings kept (see ``audit_cluster``'s ``keep``)."""
    unlisted: dict[str, str] = field(default_factory=dict)
    """Kind -> why it could not be listed."""
    stopped: bool = False
    """Whether the run was stopped before its end (``should_stop``): it judged only part."""
    not_audited: dict[str, str] = field(default_factory=dict)
    """Namespace named (``only``) -> why it was not audited."""
    flavors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Kueue ResourceFlavor -> what it says that the policy contradicts (only those that
    say something; none where Kueue is not installed)."""
    below_baseline: dict[str, str] = field(default_factory=dict)
    """Namespace audited -> why Pod Security is not known to enforce `baseline` in it
    (webhook.engine.pod_security)."""


def never_audited(service_namespace: str | None) -> frozenset[str]:
    """The namespaces the webhooks never cover, whatever their labels: kube-system,
    kube-node-lease and the one the service runs in (None: none known)."""
    return frozenset(
        {*ALWAYS_EXEMPT_NAMESPACES, *([service_namespace] if service_namespace else [])}
    )


def namespaces_to_audit(
    api: Any, engine: Engine, all_namespaces: bool, service_namespace: str | None = None
) -> tuple[str, ...]:
    """The namespaces carrying the policy's opt-in label (every one with
    `all_namespaces`), less those never audited (``never_audited``)."""
    return tuple(_labels_of_namespaces_to_audit(api, engine, all_namespaces, service_namespace))


def _labels_of_namespaces_to_audit(
    api: Any, engine: Engine, all_namespaces: bool, service_namespace: str | None
) -> dict[str, dict[str, Any]]:
    """``namespaces_to_audit``, by name in order, each with its labels."""
    label = None if all_namespaces else engine.policy.namespace_opt_in
    skipped = never_audited(service_namespace)
    labelled = namespace_labels(api, label)
    return {n: labelled[n] for n in sorted(labelled) if n not in skipped}


def out_of_scope(
    api: Any,
    named: Iterable[str],
    in_scope: Iterable[str],
    all_namespaces: bool,
    service_namespace: str | None = None,
    opt_in: tuple[str, str] | None = None,
) -> dict[str, str]:
    """Namespace -> why it is not audited, for each of ``named`` not ``in_scope``: never
    covered by the webhooks, not opted in (``opt_in``, the policy's label; without
    ``all_namespaces``), or no such namespace."""
    covered = frozenset(in_scope)
    missing = [name for name in dict.fromkeys(named) if name not in covered]
    if not missing:
        return {}
    existing = frozenset(namespaces_in_scope(api, None))
    reasons: dict[str, str] = {}
    for name in missing:
        if name == service_namespace:
            reasons[name] = "the service's own namespace, which its webhooks never cover"
        elif name in ALWAYS_EXEMPT_NAMESPACES:
            reasons[name] = "the webhooks never cover it"
        elif name not in existing:
            reasons[name] = "no such namespace"
        elif not all_namespaces and opt_in is not None:
            reasons[name] = (
                f"not opted in (no label {opt_in[0]}={opt_in[1]}); "
                "--all-namespaces audits it as a preview"
            )
        else:
            reasons[name] = "not covered by the webhooks"
    return reasons


def _never() -> bool:
    return False


def audit_cluster(
    api: Any,
    engine: Engine,
    *,
    all_namespaces: bool = False,
    service_namespace: str | None = None,
    inventory: Inventory | None = None,
    keep: Callable[[Finding], bool] = lambda finding: True,
    found: Callable[[Finding], None] | None = None,
    listed: ListedCount | None = None,
    should_stop: Callable[[], bool] = _never,
    only: Iterable[str] | None = None,
) -> AuditRun:
    """Judge every pod and workload in the namespaces to audit.

    Every finding is counted in the run's summary; `keep` says which are also kept in
    its findings (a caller folding them as they come keeps none) and `found` is told
    of each. `listed` is told of each page listed. `should_stop` is asked before each
    page is asked for: once it says so the run ends there, ``stopped``.

    With `all_namespaces` each kind is listed across the cluster (less the namespaces
    never audited); otherwise where the kind's count across the cluster says
    (``where_to_list``): nowhere, across the cluster, or in each opted-in namespace by
    its namespaced calls. `service_namespace`, the namespace the service runs in, is never
    audited (None: no such namespace is known, only kube-system and kube-node-lease
    are left out).

    `only`, when given, narrows the run to the namespaces it names that are in scope, each
    listed by its namespaced calls (with `all_namespaces` too): nothing is asked of the
    others. Each named one out of scope is left in ``not_audited`` with the reason."""
    run = _run_of(api, engine, all_namespaces, service_namespace, only)
    run.flavors, unlisted = judge_flavors(api, engine)
    run.unlisted.update(unlisted)
    if not run.namespaces:
        return run
    if inventory is None:
        inventory = _read_inventory(api, engine, run.unlisted)
    listed_in = None if all_namespaces and only is None else run.namespaces
    audit = _Audit(api, engine, run, inventory, keep, found, listed, should_stop)
    if audit.list_kinds(listed_in, narrowed=only is not None):
        audit.judge_orphans()
    return run


def judge_flavors(api: Any, engine: Engine) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """Kueue's ResourceFlavors held to the policy's pools, where Kueue is installed: each
    that says something the policy contradicts, with what; and why they could not be
    listed, if so. Cluster-scoped, so judged whatever namespaces the run covers."""
    group, resource = kueue_flavors.GROUP, kueue_flavors.RESOURCE
    version = preferred_versions(api).get(group)
    found: dict[str, tuple[str, ...]] = {}
    if version is None:
        return found, {}
    try:
        for flavor in list_cluster_objects(api, group, version, resource):
            contradictions = kueue_flavors.flavor_contradictions(engine.policy, flavor)
            if contradictions:
                found[str((flavor.get("metadata") or {}).get("name", ""))] = tuple(contradictions)
    except ApiException as error:
        return found, {kueue_flavors.KIND: api_error_message(error)}
    return found, {}


def _run_of(
    api: Any,
    engine: Engine,
    all_namespaces: bool,
    service_namespace: str | None,
    only: Iterable[str] | None,
) -> AuditRun:
    """The run of the namespaces to audit, narrowed to `only` (those named out of scope
    left in ``not_audited``), each counted in its summary."""
    labelled = _labels_of_namespaces_to_audit(api, engine, all_namespaces, service_namespace)
    namespaces = tuple(labelled)
    not_audited: dict[str, str] = {}
    if only is not None:
        named = tuple(dict.fromkeys(only))
        not_audited = out_of_scope(
            api, named, namespaces, all_namespaces, service_namespace,
            engine.policy.namespace_opt_in,
        )  # fmt: skip
        namespaces = tuple(n for n in namespaces if n in frozenset(named))
    run = AuditRun(namespaces, not_audited=not_audited)
    run.below_baseline = {
        namespace: why
        for namespace in namespaces
        if (why := below_baseline(labelled[namespace])) is not None
    }
    for namespace in namespaces:
        run.summary.include_namespace(namespace)
    return run


class _Audit:
    """One run's listing and judging, kind after kind, then the workloads whose owner
    never appeared."""

    def __init__(
        self,
        api: Any,
        engine: Engine,
        run: AuditRun,
        inventory: Inventory,
        keep: Callable[[Finding], bool],
        found: Callable[[Finding], None] | None,
        listed: ListedCount | None,
        should_stop: Callable[[], bool],
    ) -> None:
        self.api, self.engine, self.run, self.inventory = api, engine, run, inventory
        self.keep, self.found, self.listed, self.should_stop = keep, found, listed, should_stop
        self.in_scope = frozenset(run.namespaces)
        self.versions = preferred_versions(api)
        dra = self.versions.get(DRA_GROUP) == DRA_VERSION
        self.claims_of = ClaimReads(api, run.unlisted) if dra else None
        self.served = tuple(k for k in owners_first(engine.kinds) if k.group in self.versions)
        self.owners = OwnerCheck(engine.kinds, self.served)

    def judged(self, findings: Iterable[Finding]) -> None:
        for finding in findings:
            self.run.summary.add(finding)
            if self.keep(finding):
                self.run.findings.append(finding)
            if self.found is not None:
                self.found(finding)

    def stopped(self) -> bool:
        """Whether the run is to end here (then said so in the run)."""
        if self.should_stop():
            self.run.stopped = True
        return self.run.stopped

    def list_kinds(self, listed_in: tuple[str, ...] | None, *, narrowed: bool) -> bool:
        """Each kind served listed (across the cluster for `listed_in` None) and judged;
        False when the run was stopped."""
        for kind in self.served:
            if self.stopped():
                return False
            where = listed_in
            if listed_in is not None and not narrowed:
                where = where_to_list(self.api, kind, self.versions[kind.group], listed_in)
            if not self._list_kind(kind, where):
                return False
            self.owners.listed(kind)
        return True

    def _list_kind(self, kind: TemplateKind, where: tuple[str, ...] | None) -> bool:
        version = self.versions[kind.group]
        try:
            listing = list_kind(self.api, kind, version, namespaces=where, progress=self.listed)
            for item in listing:
                self.judged(
                    _judge_listed(
                        self.engine, kind, item, self.in_scope, self.inventory,
                        self.claims_of, self.owners,
                    )
                )  # fmt: skip
                if self.stopped():  # before the next object is read
                    listing.close()
                    return False
        except ApiException as error:
            self.run.unlisted[kind.kind] = api_error_message(error)
            log.warning(
                "audit: a kind could not be listed",
                extra={"kind": kind.kind, "reason": self.run.unlisted[kind.kind]},
            )
        return True

    def judge_orphans(self) -> None:
        for deferred in self.owners.orphans():
            if self.stopped():
                return
            self.judged(
                _judge_again(
                    self.api, self.engine, self.versions, deferred, self.in_scope,
                    self.inventory, self.claims_of, self.owners,
                )
            )  # fmt: skip


def owners_first(kinds: Iterable[TemplateKind]) -> tuple[TemplateKind, ...]:
    """``kinds`` in the order they are listed: ReplicaSets and Jobs last, so that their
    usual owners (Deployments, CronJobs, JobSets and other custom kinds) are seen before
    them; otherwise as given."""
    return tuple(sorted(kinds, key=lambda kind: (kind.group, kind.kind) in USUALLY_OWNED))


@dataclass(frozen=True, slots=True)
class Deferred:
    """A workload whose controller's kind was not yet listed when it was: by name only."""

    kind: TemplateKind
    namespace: str
    name: str
    owner: Owner


class OwnerCheck:
    """Which workloads are left to their controller: only those whose controller exists.

    Told of every object listed of a kind other than Pod (``seen``) and of each kind
    once listed (``listed``); ``decide`` says of a workload ``judge``, ``leave`` (its
    owner was seen) or ``defer`` (its owner's kind is still to be listed). Holds an
    ``Owner`` per object seen and a ``Deferred`` per workload deferred, never objects."""

    def __init__(self, judged: tuple[TemplateKind, ...], to_list: tuple[TemplateKind, ...]):
        self._judged = judged
        self._to_list = {(kind.group, kind.kind) for kind in to_list}
        self._seen: set[Owner] = set()
        self._deferred: list[Deferred] = []

    def seen(self, obj: dict[str, Any], kind: TemplateKind) -> None:
        if kind is not POD:
            self._seen.add(as_owner(obj, kind))

    def listed(self, kind: TemplateKind) -> None:
        self._to_list.discard((kind.group, kind.kind))

    def decide(self, obj: dict[str, Any], kind: TemplateKind) -> str:
        """``judge``, ``leave`` or ``defer`` (then remembered: see ``orphans``)."""
        if kind is POD:
            return "judge"
        owner = judged_owner(obj, self._judged)
        if owner is None or not owner.uid:
            return "judge"
        if owner in self._seen:
            return "leave"
        if (owner.group, owner.kind) in self._to_list:
            subject = as_owner(obj, kind)
            name = (obj.get("metadata") or {}).get("name")
            if isinstance(name, str):
                self._deferred.append(Deferred(kind, subject.namespace, name, owner))
                return "defer"
        return "judge"

    def orphans(self) -> Iterator[Deferred]:
        """The deferred workloads whose owner never appeared, once every kind was listed."""
        deferred, self._deferred = self._deferred, []
        for workload in deferred:
            if workload.owner not in self._seen:
                yield workload


def _judge_listed(
    engine: Engine,
    kind: TemplateKind,
    item: Listed,
    in_scope: frozenset[str],
    inventory: Inventory,
    claims_of: ClaimsOf | None,
    owners: OwnerCheck,
) -> list[Finding]:
    if isinstance(item, TooLarge):
        if item.namespace not in in_scope:
            return []
        subject = subject_named(item.namespace, item.api_version, item.kind, item.name, item.uid)
        owners.seen({"metadata": {"namespace": item.namespace, "uid": item.uid}}, kind)
        return [too_large(subject, item.size, item.cap)]
    if (item.get("metadata") or {}).get("namespace") not in in_scope:
        return []
    owners.seen(item, kind)
    if owners.decide(item, kind) != "judge":
        return []
    return judge_object(engine, item, kind, inventory, claims_of)


def _judge_again(
    api: Any,
    engine: Engine,
    versions: dict[str, str],
    deferred: Deferred,
    in_scope: frozenset[str],
    inventory: Inventory,
    claims_of: ClaimsOf | None,
    owners: OwnerCheck,
) -> list[Finding]:
    """A deferred workload read again by name and judged, unless it is gone or now names
    an owner that was seen."""
    kind = deferred.kind
    try:
        item = read_object(api, kind, versions[kind.group], deferred.namespace, deferred.name)
    except ApiException as error:
        log.warning(
            "audit: a workload could not be read again",
            extra={"kind": kind.kind, "name": deferred.name, "reason": api_error_message(error)},
        )
        return []
    if item is None:
        return []  # gone since it was listed
    if isinstance(item, TooLarge):
        subject = subject_named(item.namespace, item.api_version, item.kind, item.name, item.uid)
        return [too_large(subject, item.size, item.cap)]
    if (item.get("metadata") or {}).get("namespace") not in in_scope:
        return []
    if owners.decide(item, kind) == "leave":
        return []
    return judge_object(engine, item, kind, inventory, claims_of)


def _read_inventory(api: Any, engine: Engine, unlisted: dict[str, str]) -> Inventory:
    """Nodes and PriorityClasses, and with a DRA pool ResourceSlices and DeviceClasses."""
    policy = engine.policy
    inventory = read_inventory(api, inventory_label_keys(policy))
    if not takes_dra_gpus(policy):
        return inventory
    try:
        slices, classes = read_dra_inventory(api, policy.dra.drivers, policy.dra.attributes)
    except CLUSTER_ERRORS as error:
        reason = cluster_error_message(error, api.configuration.host)
        unlisted["ResourceSlice"] = (
            f"could not be listed ({reason}); the DRA pools are judged by the policy's figures"
        )
        log.warning("audit: ResourceSlices could not be listed", extra={"reason": reason})
        return inventory
    return dataclasses.replace(inventory, resource_slices=slices, device_classes=classes)
