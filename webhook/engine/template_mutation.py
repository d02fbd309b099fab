"""Mutation of a workload's pod templates at the workload's CREATE: each template of a
class gets what its pods would get at theirs (``webhook.engine.mutate``).

A queue in front of the scheduler (Kueue) charges quota, orders by priority and picks
a flavor (node labels, taints) from a workload's templates before any pod exists, and
never reads the pods. Mutated only there, the pods would run with GPUs, affinity,
tolerations and a priority the queue never saw. With the templates mutated, the pods
made from them get an empty patch at their CREATE, but for the co-location hint of a
Job's own label, which kube-apiserver writes into a Job's template after the mutating
webhooks (a preferred pod affinity, which no queue charges or places by).

Only the kinds of the policy's ``mutateTemplates`` are mutated, and only at CREATE: a
queue rebuilds what it charged whenever a template stops matching it, and an UPDATE is
the queue's own (suspend, unsuspend with a flavor's node selector) or a user's, judged
by validation for what it breaks.
"""

from __future__ import annotations

from typing import Any

from webhook.engine.capacity.now import STATIC, CapacityNow
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.mutate import class_patch
from webhook.engine.pod import read_pod
from webhook.engine.templates import TemplateKind, pod_templates
from webhook.engine.workloads import field_path
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy


def mutate_templates(
    policy: Policy,
    obj: dict[str, Any],
    kind: TemplateKind,
    now: CapacityNow = STATIC,
    objects: ClaimObjects = NO_CLAIMS,
) -> list[dict[str, Any]]:
    """The patch of `obj` (a workload of `kind`) that gives each template of a class what
    its pods would get at their CREATE. Raises MalformedObject, naming the template's
    field, for a template that cannot be read."""
    operations: list[dict[str, Any]] = []
    for pointer, template in pod_templates(obj, kind):
        try:
            found = class_patch(policy, read_pod(template, policy), now, objects, template=True)
        except MalformedObject as error:
            raise MalformedObject(f"{field_path(pointer)}.{error.path}", error.reason) from error
        operations += ({**op, "path": pointer + op["path"]} for op in found)
    return operations
