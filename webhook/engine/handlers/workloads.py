"""The webhooks of workloads: Deployment ... CronJob, and the policy's kinds (PyTorchJob,
say), refused at their CREATE and UPDATE when a pod of their templates would be; and the
templates of the policy's ``mutateTemplates`` kinds mutated at their CREATE, so that a
queue that charges and places a workload by its templates (Kueue) sees the pods that
will run (``webhook.engine.template_mutation``).

The validating one's condition looks for the pods' GPU markers in the templates
(``cel.workload_relevance_condition``), the mutating one's for a template of a class
(``cel.classed_template_condition``). Rules for kinds a cluster does not serve are
accepted by kube-apiserver and simply never match.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhook.engine.decision import (
    ENFORCE,
    EXEMPTION,
    Decision,
    Violation,
    allow,
    allow_injected,
    judge,
    malformed,
    subject,
)
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import MAX_SOURCES, ClaimObjects, sources_named
from webhook.engine.handlers.cel import classed_template_condition, workload_relevance_condition
from webhook.engine.handlers.declaration import Condition, Handler, Judge, ResourceRule, Review
from webhook.engine.handlers.twins import classed_template, workload_relevant
from webhook.engine.pod import read_pod
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules import workload_class
from webhook.engine.rules.registry import with_modes
from webhook.engine.template_mutation import classed_templates_changed, mutate_templates
from webhook.engine.templates import (
    CONTROLLER_KINDS,
    JOB,
    POD,
    TemplateKind,
    mutated_template_kinds,
    pod_templates,
    template_kind,
)
from webhook.engine.workloads import field_path, template_violations, workload_denial
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = ["MUTATE_WORKLOADS", "VALIDATE_WORKLOADS"]


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


def mutate_workload_create(engine: Engine, review: Review) -> Decision:
    """Each template of a class given what its pods would get at their CREATE."""
    return _mutate_workload(engine, review, old=None)


def mutate_workload_update(engine: Engine, review: Review) -> Decision:
    """Each template the update gives a class mutated as at CREATE; a Job's refused, its
    template taking no resources or priority after its CREATE."""
    return _mutate_workload(engine, review, old=review.request.old_object)


def _mutate_workload(engine: Engine, review: Review, old: Any) -> Decision:
    request = review.request
    kind = _kind(engine, request)
    if kind is None or kind.kind not in engine.policy.mutated_template_kinds:
        return allow()
    try:
        if old is not None and kind in FIXED_TEMPLATE_KINDS:
            refused = classed_templates_changed(engine.policy, request.object, old, kind)
            if refused:
                return _class_given_late(engine, request, kind, refused)
        now = engine.capacity(review.inventory)
        patch = mutate_templates(engine.policy, request.object, kind, now, review.claims, old)
        return allow_injected(patch, engine.policy.revision)
    except MalformedObject as error:
        return malformed(str(error))


FIXED_TEMPLATE_KINDS = (JOB,)
"""Kinds whose template keeps its containers' resources and its priority once created
(kube-apiserver lets a suspended Job's template change only its scheduling directives,
labels and annotations): a class given to it later cannot be given what it needs."""


def _class_given_late(
    engine: Engine, request: AdmissionRequest, kind: TemplateKind, pointers: list[str]
) -> Decision:
    fields = ", ".join(field_path(pointer) for pointer in pointers)
    message = (
        f"the update gives {fields} a class (label {engine.policy.workload_label} or a label "
        f"the class is judged by, added or changed), but a {kind.kind}'s template keeps its "
        "containers' resources and its priority from its CREATE, so it cannot be given the "
        "GPUs, priority and placement of the class: create the workload again with the label"
    )
    label = None
    for pointer, template in pod_templates(request.object, kind):
        if pointer in pointers:
            label = read_pod(template, engine.policy).labels.get(engine.policy.workload_label)
            break
    found = with_modes(engine.policy, label, [Violation(workload_class.RULE, message)])
    named = subject(kind.kind, request.namespace, _workload_name(request))
    return judge(found, named)


def workload_rules(policy: Policy) -> tuple[ResourceRule, ...]:
    """CREATE and UPDATE of the built-in controllers (v1) and the policy's kinds (every
    version), one rule per group and version."""
    judges = {"CREATE": validate_workload, "UPDATE": validate_workload}
    return _rules((*CONTROLLER_KINDS, *policy.workload_kinds), judges)


def mutated_workload_rules(policy: Policy) -> tuple[ResourceRule, ...]:
    """CREATE and UPDATE of the kinds whose templates the policy mutates."""
    judges = {"CREATE": mutate_workload_create, "UPDATE": mutate_workload_update}
    return _rules(mutated_template_kinds(policy), judges)


def _rules(
    kinds: tuple[TemplateKind, ...], judges: Mapping[str, Judge]
) -> tuple[ResourceRule, ...]:
    """One rule per group and version: v1 of the built-in controllers, every version of
    the policy's kinds."""
    resources: dict[tuple[str, str], list[str]] = {}
    for kind in kinds:
        version = "v1" if kind in CONTROLLER_KINDS else "*"
        resources.setdefault((kind.group, version), []).append(kind.resource)
    return tuple(
        ResourceRule(group, (version,), tuple(names), judges, reads=template_claim_sources)
        for (group, version), names in resources.items()
    )


MUTATE_WORKLOADS = Handler(
    "mutate-workloads",
    mutating=True,
    rules=mutated_workload_rules,
    summary=(
        "Gives the pod templates of a class, at their workload's CREATE and at an UPDATE "
        "that gives them a class, what their pods would get at theirs, so that a queue "
        "charging and placing the workload by its templates (Kueue) sees the pods that "
        "will run."
    ),
    conditions=(Condition("classed-template", classed_template_condition, classed_template),),
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
