"""Mutation of a workload's pod templates at the workload's CREATE: each template of a
class gets what its pods would get at theirs (``webhook.engine.mutate``).

A queue in front of the scheduler (Kueue) charges quota, orders by priority and picks
a flavor (node labels, taints) from a workload's templates before any pod exists, and
never reads the pods. Mutated only there, the pods would run with GPUs, affinity,
tolerations and a priority the queue never saw. With the templates mutated, the pods
made from them get an empty patch at their CREATE, but for the co-location hint of a
Job's own label, which kube-apiserver writes into a Job's template after the mutating
webhooks (a preferred pod affinity, which no queue charges or places by).

Only the kinds of the policy's ``mutateTemplates`` are mutated: at CREATE every template
of a class, and at an UPDATE the templates the update gives a class (a class label, a
GPU model label or an exemption label added or changed, ``Policy.fixed_label_keys``).
Otherwise a suspended workload created with a template of no class and given one later
would be charged and placed by a queue as what it was, while its pods get GPUs at their
CREATE. Other UPDATEs are the queue's own (suspend, unsuspend with a flavor's node
selector, restore at eviction) or a user's, judged by validation for what they break:
mutated again, a workload admitted before a policy change would be patched at the
queue's unsuspend, which a Job refuses for fields it keeps fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.capacity.now import STATIC, CapacityNow
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.mutate import class_patch
from webhook.engine.pod import read_pod
from webhook.engine.templates import TemplateKind, pod_templates
from webhook.engine.workloads import field_path, templates_or_none
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy


def mutate_templates(
    policy: Policy,
    obj: dict[str, Any],
    kind: TemplateKind,
    now: CapacityNow = STATIC,
    objects: ClaimObjects = NO_CLAIMS,
    old: Any = None,
) -> list[dict[str, Any]]:
    """The patch of `obj` (a workload of `kind`) that gives each template of a class what
    its pods would get at their CREATE; at an UPDATE (`old` the object before it), only
    the templates the update gives a class (`classed_by_update`). Raises MalformedObject,
    naming the template's field, for a template that cannot be read."""
    operations: list[dict[str, Any]] = []
    before = templates_or_none(old, kind) if old is not None else None
    for pointer, template in pod_templates(obj, kind):
        if before is not None and not classed_by_update(policy, template, before.get(pointer)):
            continue
        try:
            found = class_patch(policy, read_pod(template, policy), now, objects, template=True)
        except MalformedObject as error:
            raise MalformedObject(f"{field_path(pointer)}.{error.path}", error.reason) from error
        operations += ({**op, "path": pointer + op["path"]} for op in found)
    return operations


def classed_by_update(policy: Policy, template: Any, before: Any) -> bool:
    """Whether an update gives `template` (`before` it: the same template of the old
    object, None when new) its class: a label the class is judged by added or changed
    (or any template that is new), and a class it names."""
    labels = _labels(template)
    if policy.classes.get(labels.get(policy.workload_label, "")) is None:
        return False
    if before is None:
        return True
    old = _labels(before)
    return any(labels.get(key) != old.get(key) for key in policy.fixed_label_keys)


def classed_templates_changed(
    policy: Policy, obj: dict[str, Any], old: Any, kind: TemplateKind
) -> list[str]:
    """The pointers of the templates of `obj` an update gives a class."""
    before = templates_or_none(old, kind)
    return [
        pointer
        for pointer, template in pod_templates(obj, kind)
        if classed_by_update(policy, template, before.get(pointer))
    ]


def _labels(template: Any) -> Mapping[str, Any]:
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}
