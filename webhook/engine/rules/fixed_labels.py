"""What a pod was admitted as stays what it is: the labels it is judged by and the
devices it asks the runtime for cannot change by an update.

A pod's class is read afresh by every later check (a debug container, an ungate, a
claim's reservation), so a class changed or dropped on a running pod would be judged
against a class it was never admitted as, or none. kube-apiserver lets labels and
annotations of a running pod change; these are refused instead:

- a change (added, removed, another value) of a label of ``Policy.fixed_label_keys``:
  the workload class, the GPU model, a label an exemption matches (rule workload-class);
- an annotation of its GPU share (KAI's ``gpu-fraction``, ``gpu-memory``,
  ``gpu-fraction-num-devices``) added, removed or changed: KAI reads it when it places
  the pod, so one added to a pending pod would get it a GPU unjudged (rule gpu-sharing);
- a CDI annotation added or changed, which the runtime reads when the pod's sandbox is
  made again (rule device-annotations).

To move a pod to another class, it is made again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.decision import Violation, echo
from webhook.engine.gpu_shares import FIXED_ANNOTATIONS
from webhook.engine.rules import device_access, sharing, workload_class
from webhook.engine.rules.registry import with_modes
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy


def fixed_at_create(policy: Policy, new: Any, old: Any) -> list[Violation]:
    """The changes of an update of a pod (`new`, `old`: the objects of the review) that
    its CREATE fixed, each with its rule's mode for the pod's class as admitted;
    MalformedObject for objects without metadata a pod has."""
    new_meta, old_meta = _metadata(new, "object"), _metadata(old, "oldObject")
    labels, old_labels = _mapping(new_meta.get("labels")), _mapping(old_meta.get("labels"))
    found = [
        Violation(workload_class.RULE, _label_message(key, old_labels.get(key), labels.get(key)))
        for key in policy.fixed_label_keys
        if (key in labels) != (key in old_labels) or labels.get(key) != old_labels.get(key)
    ]
    notes, old_notes = _mapping(new_meta.get("annotations")), _mapping(old_meta.get("annotations"))
    found += [
        Violation(sharing.RULE, _share_message(key, old_notes.get(key), notes.get(key)))
        for key in FIXED_ANNOTATIONS
        if (key in notes) != (key in old_notes) or notes.get(key) != old_notes.get(key)
    ]
    found += [
        Violation(
            device_access.ANNOTATIONS,
            f"the update gives the pod annotation {echo(key)}, which asks the container "
            "runtime for CDI devices (such as nvidia.com/gpu=all) the scheduler did not "
            "assign; a running pod's devices are those it was admitted with",
        )
        for key, value in notes.items()
        if isinstance(key, str)
        and device_access.is_cdi_annotation(key)
        and (key not in old_notes or old_notes[key] != value)
    ][: device_access.PER_POD_LIMIT]
    label = old_labels.get(policy.workload_label)
    return list(with_modes(policy, label if isinstance(label, str) else None, found))


def _share_message(key: str, before: Any, after: Any) -> str:
    was = "none" if before is None else echo(str(before))
    now = "none" if after is None else echo(str(after))
    return (
        f"the update changes annotation {echo(key)} from {was} to {now}: a pod's GPU share "
        "is judged at its CREATE, and its scheduler reads it when it places the pod; make "
        "the pod again to change it"
    )


def _label_message(key: str, before: Any, after: Any) -> str:
    was = "none" if before is None else echo(str(before))
    now = "none" if after is None else echo(str(after))
    return (
        f"the update changes label {echo(key)} from {was} to {now}: a pod is judged as it "
        "was admitted, by its class, GPU model and exemption labels at its CREATE; make "
        "the pod again (or change its controller's template) to change them"
    )


def _metadata(obj: Any, name: str) -> Mapping[str, Any]:
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(metadata, Mapping):
        raise MalformedObject(f"{name}.metadata", "a pod needs metadata")
    return metadata


def _mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}
