"""The pod labels a `policy test` case names by meaning: `workload` and `gpuModel`.

A case says `workload: inference` instead of writing `gpu-admission.io/workload: inference`
in its object's labels; the runner writes the label under the key the policy under test
gives it (`podLabels.workload`, and `podLabels.gpuModel` for `gpuModel`), in the labels of
each pod the object stands for: a Pod's own, or those of each of a workload's pod
templates (found as the engine finds them, the policy's workloadKinds included). So the
same cases judge a copy of the policy whose label keys are renamed.

A case is refused, at the line of its field, when it names a class the policy does not
have (or a GPU model no pool of it has), when its object already carries the label the
field writes (the class would be said twice, and could be said two ways), when its
object is a claim object (which has no pods), or when the labels to write into are not a
mapping. The object of the case is never changed: a labelled copy is returned.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.engine.templates import TemplateKind, pod_templates, template_kind
from webhook.engine.workloads import field_path
from webhook.errors import MalformedObject
from webhook.offline.case_wording import line_of, unknown_name
from webhook.offline.claim_documents import is_claim_object
from webhook.offline.documents import ManifestError
from webhook.policy.compiled import Policy

__all__ = ["LabelField", "case_labels", "labelled"]

LabelField = tuple[str, str, str]
"""(the case's field, its value, the pod label key the policy reads it from)."""


def case_labels(policy: Policy, workload: str | None, gpu_model: str | None) -> list[LabelField]:
    """The labels the case's fields ask for, each with the policy's key for it."""
    found: list[LabelField] = []
    if workload is not None:
        found.append(("workload", workload, policy.workload_label))
    if gpu_model is not None:
        found.append(("gpuModel", gpu_model, policy.gpu_model_label))
    return found


def labelled(
    obj: Mapping[str, Any],
    fields: Sequence[LabelField],
    policy: Policy,
    kinds: tuple[TemplateKind, ...],
    text: str,
    source: str,
) -> dict[str, Any]:
    """A copy of `obj` whose pods carry the labels of `fields` under the policy's keys;
    raises ManifestError, at the line of the field, for a case that cannot mean them."""
    result = copy.deepcopy(dict(obj))
    if not fields:
        return result
    for field, value, _ in fields:
        _check_known(field, value, policy, text, source)
    if is_claim_object(obj):
        field = fields[0][0]
        reason = (
            f"{field}: a {obj.get('kind')} has no pods to label; {field} is for a Pod or an "
            "object with pod templates"
        )
        raise ManifestError(source, line_of(text, (field,)), reason)
    kind = template_kind(result, kinds)
    if kind is None:
        return result  # judged as before: an object without pod templates
    try:
        templates = pod_templates(result, kind)
    except MalformedObject:
        return result  # judged as before: a malformed object
    written: set[int] = set()  # YAML aliases share one template: it is labelled once
    for pointer, template in templates:
        _label(template, pointer, fields, text, source, written)
    return result


def _check_known(field: str, value: str, policy: Policy, text: str, source: str) -> None:
    if field == "workload":
        known, what = list(policy.classes), "a class of the policy"
    else:
        models = (m for workload in policy.classes.values() for m in workload.models)
        known, what = list(dict.fromkeys(models)), "a GPU model of the policy's pools"
    if value not in known:
        line, reason = unknown_name(field, value, known, what, text)
        raise ManifestError(source, line, reason)


def _label(
    template: dict[str, Any],
    pointer: str,
    fields: Sequence[LabelField],
    text: str,
    source: str,
    written: set[int],
) -> None:
    """Write the labels of `fields` into the metadata of the pod (template) at `pointer`,
    unless they were written into these very labels (`written`: their ids) already."""
    where = _dotted(pointer, "metadata")
    metadata = template.get("metadata")
    if metadata is None:
        metadata = template["metadata"] = {}
    if not isinstance(metadata, dict):
        raise ManifestError(source, line_of(text, (fields[0][0],)), f"{where}: not a mapping")
    labels = metadata.get("labels")
    if labels is None:
        labels = metadata["labels"] = {}
    if not isinstance(labels, dict):
        reason = f"{where}.labels: not a mapping"
        raise ManifestError(source, line_of(text, (fields[0][0],)), reason)
    if id(labels) in written:
        return
    written.add(id(labels))
    for field, value, key in fields:
        if key in labels:
            reason = (
                f"{field}: the object already sets the label {key} ({where}.labels); "
                f"name the {field} once: keep `{field}: {value}` and drop the label"
            )
            raise ManifestError(source, line_of(text, (field,)), reason)
        labels[key] = value


def _dotted(pointer: str, leaf: str) -> str:
    """`spec.template.metadata` of `/spec/template`; `metadata` of a Pod's empty pointer."""
    path = field_path(pointer)
    return f"{path}.{leaf}" if path else leaf
