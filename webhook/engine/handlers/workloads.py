"""The webhook of workloads: Deployment ... CronJob, and the policy's kinds (PyTorchJob,
say), refused at their CREATE and UPDATE when a pod of their templates would be.

Its condition looks for the pods' GPU markers in the templates
(``cel.workload_relevance_condition``). Rules for kinds a cluster does not serve are
accepted by kube-apiserver and simply never match.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from webhook.engine.decision import (
    ENFORCE,
    EXEMPTION,
    Decision,
    Violation,
    allow,
    judge,
    malformed,
    subject,
)
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import MAX_SOURCES, ClaimObjects, sources_named
from webhook.engine.handlers.cel import workload_relevance_condition
from webhook.engine.handlers.declaration import Condition, Handler, ResourceRule, Review
from webhook.engine.handlers.twins import workload_relevant
from webhook.engine.pod import read_pod
from webhook.engine.request import AdmissionRequest
from webhook.engine.templates import (
    CONTROLLER_KINDS,
    POD,
    TemplateKind,
    pod_templates,
    template_kind,
)
from webhook.engine.workloads import template_violations, workload_denial
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["VALIDATE_WORKLOADS"]


def _kind(engine: Engine, request: AdmissionRequest) -> TemplateKind | None:
    """The workload kind of the object under review, told by its own kind and group."""
    if not isinstance(request.object, dict):
        return None
    kind = template_kind(request.object, engine.kinds)
    return None if kind is POD else kind


def template_claim_sources(
    engine: Engine, request: AdmissionRequest, read: ClaimObjects
) -> tuple[ClaimSource, ...]:
    """The templates and claims the workload's pod templates name, each once."""
    kind = _kind(engine, request)
    if kind is None:
        return ()
    try:
        templates = pod_templates(request.object, kind)
    except MalformedObject:
        return ()  # validation says what is wrong with it
    return sources_named(template for _, template in templates)[:MAX_SOURCES]


def validate_workload(engine: Engine, review: Review) -> Decision:
    """Each pod template judged as its pods will be admitted (after our mutation), and
    refused only for what the change breaks; exempted templates are audited."""
    request, claims = review.request, review.claims
    kind = _kind(engine, request)
    if kind is None:
        return allow()
    now = engine.capacity(review.inventory)
    exempted: list[str] = []

    def check(obj: dict[str, Any]) -> list[Violation]:
        labels = read_pod(obj, engine.policy).labels
        exemption = engine.policy.exemption_for(request.namespace, labels)
        if exemption is not None:
            exempted.append(exemption.reason)
            return []
        return engine.created_pod_violations(obj, now, claims)

    try:
        found = template_violations(request.object, request.old_object, kind, check)
    except MalformedObject as error:
        return malformed(str(error))
    if not found and not exempted:
        return allow()
    named = subject(kind.kind, request.namespace, _workload_name(request))
    message = workload_denial(named, found, ENFORCE)
    decision = judge([v for t in found for v in t.violations], named, message)
    if exempted:
        annotations = {**decision.audit_annotations, EXEMPTION: "; ".join(dict.fromkeys(exempted))}
        decision = dataclasses.replace(decision, audit_annotations=annotations)
    return decision


def _workload_name(request: AdmissionRequest) -> str:
    metadata = request.object.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = request.name or metadata.get("name") or metadata.get("generateName") or ""
    return name if isinstance(name, str) else ""


def workload_rules(policy: Policy) -> tuple[ResourceRule, ...]:
    """CREATE and UPDATE of the built-in controllers (v1) and the policy's kinds (every
    version), one rule per group and version."""
    resources: dict[tuple[str, str], list[str]] = {}
    for kind in CONTROLLER_KINDS:
        resources.setdefault((kind.group, "v1"), []).append(kind.resource)
    for kind in policy.workload_kinds:
        resources.setdefault((kind.group, "*"), []).append(kind.resource)
    judges = {"CREATE": validate_workload, "UPDATE": validate_workload}
    return tuple(
        ResourceRule(group, (version,), tuple(names), judges, reads=template_claim_sources)
        for (group, version), names in resources.items()
    )


VALIDATE_WORKLOADS = Handler(
    "validate-workloads",
    mutating=False,
    rules=workload_rules,
    summary="Refuses a workload whose pod templates make pods the pod webhooks would refuse.",
    conditions=(
        Condition("gpu-relevant-template", workload_relevance_condition, workload_relevant),
    ),
)
