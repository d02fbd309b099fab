"""Validation of workload objects (Deployment, Job, PyTorchJob, ...) by their pod templates.

Each template is judged as the pod its controller will create: requests
defaulted from limits (webhook.engine.templates), then our own mutation, as
kube-apiserver will apply it at the pod's CREATE, then the pod rules. So
`kubectl apply` of a bad Deployment fails at once instead of its pods failing
in the ReplicaSet's events. The templates of the policy's ``mutateTemplates`` kinds
are mutated at their CREATE (webhook.engine.template_mutation); judged here, a template
so mutated meets no mutation of its own, ours being idempotent.

An UPDATE judges only the templates it changes: a scale or a relabel of a
workload admitted before a policy change keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.engine.decision import Violation, denial
from webhook.engine.templates import TemplateKind, pod_from_template, pod_templates
from webhook.errors import MalformedObject

PodCheck = Callable[[dict[str, Any]], list[Violation]]
"""The violations of a pod as the controller creates it (before our mutation)."""


@dataclass(frozen=True, slots=True)
class TemplateViolations:
    path: str
    """The template's field path, e.g. `spec.template` or `spec.replicatedJobs[0].template`."""
    violations: list[Violation]

    def messages(self, mode: str | None = None) -> list[str]:
        """The messages of the template's violations (of `mode` only, when given)."""
        return [v.message for v in self.violations if mode is None or v.mode == mode]


def workload_denial(subject: str, templates: list[TemplateViolations], mode: str) -> str:
    """The denial of a workload for its templates' violations of `mode` (see `denial`)."""
    found = [(t.path, t.messages(mode)) for t in templates]
    return denial(subject, templates=[(path, messages) for path, messages in found if messages])


def template_violations(
    obj: Mapping[str, Any], old: Any, kind: TemplateKind, check: PodCheck
) -> list[TemplateViolations]:
    """The templates of `obj` that break a rule; those equal in `old` are not judged again."""
    unchanged = templates_or_none(old, kind)
    found: list[TemplateViolations] = []
    for pointer, template in pod_templates(obj, kind):
        if unchanged.get(pointer) == template:
            continue
        path = field_path(pointer)
        try:
            violations = check(pod_from_template(template))
        except MalformedObject as error:
            raise MalformedObject(f"{path}.{error.path}", error.reason) from error
        if violations:
            found.append(TemplateViolations(path, violations))
    return found


def field_path(pointer: str) -> str:
    """`spec.replicatedJobs[0].template` of `/spec/replicatedJobs/0/template`."""
    path = ""
    for token in pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        path += f"[{key}]" if key.isdigit() else f".{key}" if path else key
    return path


def templates_or_none(old: Any, kind: TemplateKind) -> dict[str, Any]:
    """The templates of `old` by pointer; none for no object or one that cannot be read."""
    if not isinstance(old, dict):
        return {}
    try:
        return dict(pod_templates(old, kind))
    except MalformedObject:
        return {}
