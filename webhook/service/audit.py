"""The audit of what already runs: list, judge, add up. `gpu-admission audit` and `serve` share it.

The namespaces audited are those the webhooks cover: the ones carrying the policy's
opt-in label, or with ``all_namespaces`` every one they could cover (a preview of a
rollout), never kube-system, kube-node-lease or the service's own. Every kind the
engine judges at apply time is listed (Pods, the built-in controllers and the
policy's workload kinds) page by page and judged as it comes
(``webhook.offline.audit``); a kind the cluster does not serve is skipped, one the
credentials may not list is reported in ``unlisted``. Capacity rules judge against
the Nodes and PriorityClasses as they are (``inventory``), read once when not given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from webhook.engine import Engine
from webhook.engine.inventory import Inventory
from webhook.engine.templates import POD, TemplateKind
from webhook.install.configurations import ALWAYS_EXEMPT_NAMESPACES
from webhook.install.names import NAMESPACE
from webhook.kube.api_errors import ApiException, api_error_message
from webhook.kube.listing import (
    list_kind,
    namespaces_in_scope,
    preferred_versions,
    read_inventory,
)
from webhook.offline.audit import AuditSummary, Finding, judge_object, left_to_owner
from webhook.service.inventory import inventory_label_keys

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


def namespaces_to_audit(api: Any, engine: Engine, all_namespaces: bool) -> tuple[str, ...]:
    label = None if all_namespaces else engine.policy.namespace_opt_in
    return tuple(n for n in namespaces_in_scope(api, label) if n not in NEVER_AUDITED)


def audit_cluster(
    api: Any,
    engine: Engine,
    *,
    all_namespaces: bool = False,
    inventory: Inventory | None = None,
    keep: Callable[[Finding], bool] = lambda finding: True,
    listed: Listed | None = None,
) -> AuditRun:
    """Judge every pod and workload in the namespaces to audit. `keep` says which findings
    are kept besides being counted; `listed` is told of each page listed."""
    namespaces = namespaces_to_audit(api, engine, all_namespaces)
    run = AuditRun(namespaces)
    for namespace in namespaces:
        run.summary.include_namespace(namespace)
    if not namespaces:
        return run
    if inventory is None:
        inventory = read_inventory(api, inventory_label_keys(engine.policy))
    in_scope = frozenset(namespaces)
    versions = preferred_versions(api)
    for kind in engine.kinds:
        version = versions.get(kind.group)
        if version is None:
            continue  # the cluster does not serve the kind: none of it runs
        try:
            for page in list_kind(api, kind, version, progress=listed):
                _judge_page(engine, kind, page.items, in_scope, inventory, keep, run)
        except ApiException as error:
            run.unlisted[kind.kind] = api_error_message(error)
            log.warning(
                "audit: a kind could not be listed",
                extra={"kind": kind.kind, "reason": run.unlisted[kind.kind]},
            )
    return run


def _judge_page(
    engine: Engine,
    kind: TemplateKind,
    items: Iterable[dict[str, Any]],
    in_scope: frozenset[str],
    inventory: Inventory,
    keep: Callable[[Finding], bool],
    run: AuditRun,
) -> None:
    for item in items:
        if (item.get("metadata") or {}).get("namespace") not in in_scope:
            continue
        if kind is not POD and left_to_owner(item, engine.kinds):
            continue
        for finding in judge_object(engine, item, kind, inventory):
            run.summary.add(finding)
            if keep(finding):
                run.findings.append(finding)
