"""The pod templates of workload objects, and the pod a controller makes of one.

Each workload kind names where its pod templates are as JSON-pointer patterns,
in which `*` stands for every key of a mapping or every item of a list, so a
new kind (PyTorchJob: `/spec/pytorchReplicaSpecs/*/template`) is a row of
data, not code. A Pod is its own template, at the empty pointer.

A template is judged as the pod kube-apiserver hands to our mutating webhook:
the template's metadata and spec, with requests defaulted from limits, which
kube-apiserver does for Pods and not for templates. The input is never
changed; only what defaulting changes is copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.patch import escape
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy
from webhook.policy.compiled import TemplateKind as TemplateKind

WILDCARD = "*"
DEFAULTED_CONTAINER_LISTS = ("initContainers", "containers")
"""The lists whose requests kube-apiserver defaults from limits (ephemeral ones have none)."""


POD = TemplateKind("", "Pod", ("",), "pods")
JOB = TemplateKind("batch", "Job", ("/spec/template",), "jobs")

CONTROLLER_KINDS: tuple[TemplateKind, ...] = (
    TemplateKind("apps", "Deployment", ("/spec/template",), "deployments"),
    TemplateKind("apps", "StatefulSet", ("/spec/template",), "statefulsets"),
    TemplateKind("apps", "DaemonSet", ("/spec/template",), "daemonsets"),
    TemplateKind("apps", "ReplicaSet", ("/spec/template",), "replicasets"),
    JOB,
    TemplateKind("batch", "CronJob", ("/spec/jobTemplate/spec/template",), "cronjobs"),
)
"""The built-in controllers, all at version v1."""

BUILT_IN_KINDS: tuple[TemplateKind, ...] = (POD, *CONTROLLER_KINDS)


def template_kinds(policy: Policy) -> tuple[TemplateKind, ...]:
    """The built-in kinds and the policy's workload kinds (PyTorchJob, RayCluster, ...)."""
    return (*BUILT_IN_KINDS, *policy.workload_kinds)


def mutated_template_kinds(policy: Policy) -> tuple[TemplateKind, ...]:
    """The kinds whose pod templates are mutated at their CREATE (the policy's
    ``mutateTemplates``), in the order of ``template_kinds``."""
    named = policy.mutated_template_kinds
    return tuple(kind for kind in (*CONTROLLER_KINDS, *policy.workload_kinds) if kind.kind in named)


def api_group(api_version: Any) -> str:
    """`apps` of `apps/v1`; empty for the core group's `v1`."""
    if not isinstance(api_version, str) or "/" not in api_version:
        return ""
    return api_version.split("/", 1)[0]


def template_kind(
    obj: Mapping[str, Any], kinds: tuple[TemplateKind, ...] = BUILT_IN_KINDS
) -> TemplateKind | None:
    """The kind of `obj` among `kinds`, or None when it holds no pod template we know."""
    group, kind = api_group(obj.get("apiVersion")), obj.get("kind")
    return next((k for k in kinds if k.group == group and k.kind == kind), None)


def pod_templates(obj: Mapping[str, Any], kind: TemplateKind) -> list[tuple[str, Any]]:
    """(JSON pointer, template) for each pod template of `obj`, in document order.

    A path that leads nowhere matches nothing (LeaderWorkerSet's leaderTemplate is
    optional; a kind that requires a template has kube-apiserver or its operator say
    so), and neither does a wildcard over an empty collection; a step of the wrong
    shape (a list where a mapping must be) raises MalformedObject.
    """
    found: list[tuple[str, Any]] = []
    for pattern in kind.paths:
        tokens = [_unescape(t) for t in pattern.split("/")[1:]] if pattern else []
        found += _walk(obj, tokens, "", "")
    return found


def pod_from_template(template: Mapping[str, Any]) -> dict[str, Any]:
    """The pod a controller creates from `template`, as our mutating webhook receives it."""
    metadata = template.get("metadata")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata if metadata is not None else {},
        "spec": default_requests_from_limits(template.get("spec")),
    }


def default_requests_from_limits(spec: Any) -> Any:
    """`spec` with each container's missing requests set to its limits (Kubernetes' Pod defaulting).

    Returns `spec` itself when nothing is missing; otherwise a copy sharing
    every part it did not have to change.
    """
    if not isinstance(spec, dict):
        return spec
    changed: dict[str, list[Any]] = {}
    for list_name in DEFAULTED_CONTAINER_LISTS:
        containers = spec.get(list_name)
        if not isinstance(containers, list):
            continue
        defaulted = [_container_with_defaulted_requests(c) for c in containers]
        if any(new is not old for new, old in zip(defaulted, containers, strict=True)):
            changed[list_name] = defaulted
    return {**spec, **changed} if changed else spec


def _container_with_defaulted_requests(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return container
    limits, requests = resources.get("limits"), resources.get("requests")
    if not isinstance(limits, dict) or not isinstance(requests, dict | None):
        return container
    present = requests or {}
    missing = {name: value for name, value in limits.items() if name not in present}
    if not missing:
        return container
    return {**container, "resources": {**resources, "requests": {**present, **missing}}}


def _walk(value: Any, tokens: list[str], pointer: str, dotted: str) -> list[tuple[str, Any]]:
    if not tokens:
        if not isinstance(value, dict):
            raise MalformedObject(dotted or "object", "a pod template must be a mapping")
        return [(pointer, value)]
    token, rest = tokens[0], tokens[1:]
    if token == WILDCARD:
        if isinstance(value, dict):
            return [
                match
                for key, item in value.items()
                for match in _walk(item, rest, f"{pointer}/{escape(key)}", f"{dotted}.{key}")
            ]
        if isinstance(value, list):
            return [
                match
                for index, item in enumerate(value)
                for match in _walk(item, rest, f"{pointer}/{index}", f"{dotted}[{index}]")
            ]
        if value is None:
            return []
        raise MalformedObject(dotted, "must be a mapping or a list")
    if not isinstance(value, dict):
        raise MalformedObject(dotted or "object", "must be a mapping")
    here = f"{dotted}.{token}" if dotted else token
    if value.get(token) is None:
        return []
    return _walk(value.get(token), rest, f"{pointer}/{escape(token)}", here)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")
