"""The audit of what already runs: list, judge, add up. `gpu-admission audit` and `serve` share it.

The namespaces audited are those the webhooks cover: the ones carrying the policy's
opt-in label, or with ``all_namespaces`` every one they could cover (a preview of a
rollout), never kube-system, kube-node-lease or the service's own. Every kind the
engine judges at apply time is listed (Pods, the built-in controllers and the
policy's workload kinds), in each opted-in namespace by its namespaced calls (across
the cluster only for ``all_namespaces``), page by page and judged as it comes
(``webhook.offline.audit``); a kind the cluster does not serve is skipped, one the
credentials may not list is reported in ``unlisted``. The ResourceClaimTemplates and
ResourceClaims pods name are read as they are met (``audit_claims``), when the cluster
serves ``resource.k8s.io/v1``. Capacity rules judge against the Nodes and
PriorityClasses as they are (``inventory``), read once when not given, with the
ResourceSlices and DeviceClasses when a pool of the policy takes GPUs through
DRA (credentials that may not list them leave those pools to the policy's figures, said
in ``unlisted``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from webhook.engine import Engine
from webhook.engine.inventory import Inventory
from webhook.engine.templates import POD, TemplateKind
from webhook.install.configurations import ALWAYS_EXEMPT_NAMESPACES
from webhook.install.names import NAMESPACE
from webhook.kube.api_errors import (
    CLUSTER_ERRORS,
    ApiException,
    api_error_message,
    cluster_error_message,
)
from webhook.kube.claims import RESOURCE_GROUP, RESOURCE_VERSION
from webhook.kube.listing import (
    list_kind,
    namespaces_in_scope,
    preferred_versions,
    read_dra_inventory,
    read_inventory,
)
from webhook.offline.audit import (
    AuditSummary,
    ClaimsOf,
    Finding,
    judge_object,
    left_to_owner,
)
from webhook.service.audit_claims import ClaimReads
from webhook.service.inventory import inventory_label_keys, takes_dra_gpus

__all__ = ["AuditRun", "audit_cluster", "namespaces_to_audit"]

log = logging.getLogger("gpu_admission.audit")

NEVER_AUDITED = frozenset({*ALWAYS_EXEMPT_NAMESPACES, NAMESPACE})
"""Namespaces the webhooks never cover, whatever their labels."""

Listed = Callable[[TemplateKind, int], None]


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


def namespaces_to_audit(api: Any, engine: Engine, all_namespaces: bool) -> tuple[str, ...]:
    label = None if all_namespaces else engine.policy.namespace_opt_in
    return tuple(n for n in namespaces_in_scope(api, label) if n not in NEVER_AUDITED)


def _never() -> bool:
    return False


def audit_cluster(
    api: Any,
    engine: Engine,
    *,
    all_namespaces: bool = False,
    inventory: Inventory | None = None,
    keep: Callable[[Finding], bool] = lambda finding: True,
    found: Callable[[Finding], None] | None = None,
    listed: Listed | None = None,
    should_stop: Callable[[], bool] = _never,
) -> AuditRun:
    """Judge every pod and workload in the namespaces to audit.

    Every finding is counted in the run's summary; `keep` says which are also kept in
    its findings (a caller folding them as they come keeps none) and `found` is told
    of each. `listed` is told of each page listed. `should_stop` is asked before each
    page is asked for: once it says so the run ends there, ``stopped``.

    Namespaces that opted in are listed each by its namespaced calls; only with
    `all_namespaces` is each kind listed across the cluster (less the namespaces
    never audited)."""
    namespaces = namespaces_to_audit(api, engine, all_namespaces)
    run = AuditRun(namespaces)
    for namespace in namespaces:
        run.summary.include_namespace(namespace)
    if not namespaces:
        return run
    if inventory is None:
        inventory = _read_inventory(api, engine, run.unlisted)
    in_scope = frozenset(namespaces)
    listed_in = None if all_namespaces else namespaces
    versions = preferred_versions(api)
    claims_of = (
        ClaimReads(api, run.unlisted) if versions.get(RESOURCE_GROUP) == RESOURCE_VERSION else None
    )
    for kind in engine.kinds:
        version = versions.get(kind.group)
        if version is None:
            continue  # the cluster does not serve the kind: none of it runs
        if should_stop():
            run.stopped = True
            return run
        try:
            pages = list_kind(api, kind, version, namespaces=listed_in, progress=listed)
            for page in pages:
                for finding in _judge_page(
                    engine, kind, page.items, in_scope, inventory, claims_of
                ):
                    run.summary.add(finding)
                    if keep(finding):
                        run.findings.append(finding)
                    if found is not None:
                        found(finding)
                if should_stop():  # before the next page is asked for
                    run.stopped = True
                    return run
        except ApiException as error:
            run.unlisted[kind.kind] = api_error_message(error)
            log.warning(
                "audit: a kind could not be listed",
                extra={"kind": kind.kind, "reason": run.unlisted[kind.kind]},
            )
    return run


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


def _judge_page(
    engine: Engine,
    kind: TemplateKind,
    items: Iterable[dict[str, Any]],
    in_scope: frozenset[str],
    inventory: Inventory,
    claims_of: ClaimsOf | None,
) -> Iterator[Finding]:
    for item in items:
        if (item.get("metadata") or {}).get("namespace") not in in_scope:
            continue
        if kind is not POD and left_to_owner(item, engine.kinds):
            continue
        yield from judge_object(engine, item, kind, inventory, claims_of)
