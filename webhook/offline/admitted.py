"""`check --admitted`: every object of the manifests as kube-apiserver would store it
after gpu-admission's webhooks, a stream `kubectl apply -f -` takes.

A Pod is printed as mutated (requests defaulted from limits, then our patch); a workload
of a kind whose templates the policy mutates (`mutateTemplates`: Jobs, CronJobs and the ML
kinds by default) with its templates mutated; every other object as written (a
Deployment's pods are mutated when they are created, not in the Deployment). An object
the webhooks would refuse is left out, and its denial returned with where it was read.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook.engine import Engine
from webhook.engine.template_mutation import mutate_templates
from webhook.engine.templates import mutated_template_kinds, template_kind
from webhook.errors import MalformedObject
from webhook.offline.documents import Document
from webhook.offline.evaluation import Report


@dataclass(frozen=True)
class Admitted:
    objects: list[dict[str, Any]]
    """The objects admitted, in the order of the manifests."""
    denials: list[str]
    """Each refused object's denial: `FILE:LINE Kind 'name': the webhook's message`."""


def admitted(engine: Engine, documents: Sequence[Document], report: Report) -> Admitted:
    denied: dict[tuple[str, int], str] = {}
    mutated_pods: dict[tuple[str, int], dict[str, Any]] = {}
    for pod in report.pods:
        key = (pod.object.source, pod.object.line)
        if not pod.allowed:
            denied.setdefault(key, pod.message)
        elif not pod.template:
            mutated_pods[key] = dict(pod.mutated)
    for claim in report.claim_objects:
        if not claim.allowed:
            denied.setdefault((claim.object.source, claim.object.line), claim.message)
    found = Admitted([], [])
    for document in documents:
        key = (document.source, document.line)
        if key in denied:
            found.denials.append(f"{document.source}:{document.line}: {denied[key]}")
        elif key in mutated_pods:
            found.objects.append(mutated_pods[key])
        else:
            found.objects.append(_with_templates_mutated(engine, document.object))
    return found


def _with_templates_mutated(engine: Engine, obj: dict[str, Any]) -> dict[str, Any]:
    kind = template_kind(obj, mutated_template_kinds(engine.policy))
    if kind is None:
        return obj
    try:
        patch = mutate_templates(engine.policy, obj, kind)
    except MalformedObject:
        return obj  # judged, and reported, as malformed by the evaluation already
    if not patch:
        return obj
    result: dict[str, Any] = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
    return result
