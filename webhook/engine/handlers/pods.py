"""The webhooks of pods: their CREATE mutated and validated, their updates judged again
where they change where a pod can land, debug containers isolated from the node's GPUs.

Pods carrying the workload label (``CLASSED``) are the policy's business whatever else
they hold: their CREATE goes to ``mutate`` and ``validate`` with no matchCondition (any
condition costs kube-apiserver a CEL activation of the whole pod), their updates to
``validate-updates``. Pods without it (``UNCLASSED``) go to webhooks of their own whose
condition sends only those the policy can have an opinion on (``cel.gpu_relevance_condition``);
they get nothing at their CREATE, so no mutating webhook hears of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from webhook.engine.decision import (
    Decision,
    allow,
    allow_injected,
    exempt,
    judge,
    malformed,
    subject,
)
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import MAX_SOURCES, ClaimObjects, pod_claims, sources_named
from webhook.engine.env_references import env_sources
from webhook.engine.handlers.cel import gpu_relevance_condition, judged_change_condition
from webhook.engine.handlers.declaration import (
    CLASSED,
    UNCLASSED,
    Condition,
    Handler,
    Judge,
    Reads,
    ResourceRule,
    Review,
    static,
)
from webhook.engine.handlers.twins import gpu_relevant_pod, judged_change
from webhook.engine.mutate import isolate_ephemeral_containers, mutate_pod
from webhook.engine.pod import PodView, read_pod
from webhook.engine.pod_answers import glance, kept_patch
from webhook.engine.request import AdmissionRequest
from webhook.engine.rules.device_access import debug_container_mounts, privileged_containers
from webhook.engine.rules.device_env import check_device_env
from webhook.engine.rules.fixed_labels import fixed_at_create
from webhook.engine.rules.host_access import debug_host_mounts
from webhook.engine.rules.registry import with_modes
from webhook.engine.rules.visibility import check_visible_devices
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy

if TYPE_CHECKING:
    from webhook.engine.review import Engine

__all__ = [
    "MUTATE",
    "MUTATE_UNCLASSED",
    "VALIDATE",
    "VALIDATE_UNCLASSED",
    "VALIDATE_UPDATES",
    "pod_namespace",
]

PODS = "pods"
DEBUG_CONTAINERS = "pods/ephemeralcontainers"


def pod_namespace(request: AdmissionRequest, pod: PodView) -> str:
    """The request's namespace, or the pod's own where the request names none (offline)."""
    if request.namespace:
        return request.namespace
    metadata = pod.raw.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    return namespace if isinstance(namespace, str) else ""


def pod_claim_sources(
    engine: Engine, request: AdmissionRequest, read: ClaimObjects
) -> tuple[ClaimSource, ...]:
    """The templates and claims the pod names, each once."""
    if not isinstance(request.object, dict):
        return ()
    return sources_named([request.object])[:MAX_SOURCES]


def pod_sources(
    engine: Engine, request: AdmissionRequest, read: ClaimObjects
) -> tuple[ClaimSource, ...]:
    """The templates and claims the pod names and, at its CREATE, the ConfigMaps and
    Secrets its containers take whole (``webhook.engine.env_references``) when it can
    reach a GPU node."""
    claims = pod_claim_sources(engine, request, read)
    if request.operation != "CREATE":
        return claims
    taken = env_sources(request.object)
    if not taken:
        return claims
    try:
        reaches = engine.reaches_gpu_node(read_pod(request.object, engine.policy))
    except MalformedObject:
        return claims  # the judge says what is wrong with it
    return (*claims, *taken)[:MAX_SOURCES] if reaches else claims


def mutate_pod_create(engine: Engine, review: Review) -> Decision:
    """What a class pod needs injected at its CREATE. A replica of a template mutated
    before is not read again: its patch is kept."""
    request, claims = review.request, review.claims
    seen = glance(request.object, claims)
    if seen is not None:
        kept = engine.kept_patches.peek(seen.key, engine.capacity(review.inventory))
        if kept is not None:
            return allow_injected(orjson.loads(kept), engine.policy.revision)
    try:
        pod = read_pod(request.object, engine.policy)
        workload = engine.policy.classes.get(pod.labels.get(engine.policy.workload_label, ""))
        if workload is None or not workload.mutate:
            return allow()
        now = engine.capacity(review.inventory)

        def work_out() -> list[dict[str, Any]]:
            classes = now.dra.classes_for(engine.policy)
            resolved = pod_claims(engine.policy, pod, claims, classes)
            return mutate_pod(engine.policy, pod, workload, now, resolved)

        key = seen.key if seen is not None else None
        return allow_injected(
            kept_patch(engine.kept_patches, key, now, work_out), engine.policy.revision
        )
    except MalformedObject as error:
        return malformed(str(error))


def isolate_debug_containers(engine: Engine, review: Review) -> Decision:
    """Debug containers added to a running pod are hidden from the node's GPUs."""
    request = review.request
    try:
        pod = read_pod(request.object, engine.policy)
        return allow(isolate_ephemeral_containers(engine.policy, pod, request.old_object))
    except MalformedObject as error:
        return malformed(str(error))


def validate_pod_create(engine: Engine, review: Review) -> Decision:
    """The pod as created, with every rule's outcome (all skipped for an exempt pod). A
    replica of a template judged before is not read again: its findings are kept."""
    request, claims = review.request, review.claims
    now = engine.capacity(review.inventory)
    seen = glance(request.object, claims)
    found = engine.kept_findings.peek(seen.key, now) if seen is not None else None
    if seen is not None and found is not None:
        namespace = request.namespace or seen.namespace
        exemption = engine.policy.exemption_for(namespace, seen.labels)
        if exemption is not None:
            return exempt(exemption.reason, engine.rules.skipped)
        named = subject("pod", request.namespace, request.name or seen.name)
        return judge(found.violations, named, rules=found.outcomes)
    try:
        pod = read_pod(request.object, engine.policy)
        exemption = engine.policy.exemption_for(pod_namespace(request, pod), pod.labels)
        if exemption is not None:
            return exempt(exemption.reason, engine.rules.skipped)
        key = seen.key if seen is not None else None
        found = engine.findings_kept_by(key, pod, now, claims)
    except MalformedObject as error:
        return malformed(str(error))
    named = subject("pod", request.namespace, request.name or pod.name)
    return judge(found.violations, named, rules=found.outcomes)


def validate_debug_containers(engine: Engine, review: Review) -> Decision:
    """Debug containers added to a running pod may not pick GPUs by hand either (by
    environment or by mount, the pod's own volumes included), nor be privileged in a pod
    that can reach a GPU node, of a class or not (`kubectl debug --profile=sysadmin`):
    its node's GPUs are other pods'."""
    request, policy = review.request, engine.policy
    try:
        pod = read_pod(request.object, policy)
        exemption = policy.exemption_for(pod_namespace(request, pod), pod.labels)
        if exemption is not None:
            return exempt(exemption.reason)
        label = pod.labels.get(policy.workload_label)
        debug = pod.ephemeral_containers
        reaches = label in policy.classes or engine.reaches_gpu_node(
            pod, engine.capacity(review.inventory)
        )
        found = [
            *check_visible_devices(policy, debug),
            *check_device_env(policy, debug),
            *debug_container_mounts(policy, pod, debug),
            *debug_host_mounts(policy, pod, debug),
            # A class pod runs on a GPU node; a pod of no class may, where its
            # tolerations let it (an untainted pool, a toleration of every taint).
            *(privileged_containers(debug) if reaches else ()),
        ]
        violations = with_modes(policy, label, found)
    except MalformedObject as error:
        return malformed(str(error))
    return judge(violations, subject("pod", request.namespace, request.name or pod.name))


def validate_pod_update(engine: Engine, review: Review) -> Decision:
    """A pod is what it was admitted as: an update that changes a label it is judged by
    (``fixed_at_create``) or asks the runtime for CDI devices is refused. A pod whose
    scheduling fields change (tolerations, or nodeSelector and affinity of a gated pod) is
    judged as it will be; an update is refused only for what it breaks, not for what was
    already so (a pod admitted before its namespace opted in, say, whose immutable fields
    could never be mended)."""
    request, claims = review.request, review.claims
    now = engine.capacity(review.inventory)
    named = subject("update of pod", request.namespace, request.name)
    # Exempt as it was admitted: a label given by the update exempts nothing.
    was_exempt = engine.policy.exemption_for(request.namespace, _labels(request.old_object))
    if was_exempt is not None:
        return exempt(was_exempt.reason)
    try:
        changed = (
            fixed_at_create(engine.policy, request.object, request.old_object)
            if _the_policys(engine.policy, request)
            else []
        )
    except MalformedObject as error:
        return malformed(str(error))
    if changed:
        return judge(changed, named)
    try:
        pod = read_pod(request.object, engine.policy)
        exemption = engine.policy.exemption_for(pod_namespace(request, pod), pod.labels)
        if exemption is not None:
            return exempt(exemption.reason)
        violations = engine.pod_violations(pod, now, claims)
    except MalformedObject as error:
        return malformed(str(error))
    if violations:
        try:
            old = engine.pod_violations(read_pod(request.old_object, engine.policy), now, claims)
        except MalformedObject:
            old = []
        before = {(v.rule, v.message) for v in old}
        violations = [v for v in violations if (v.rule, v.message) not in before]
    return judge(violations, subject("update of pod", request.namespace, request.name or pod.name))


def _the_policys(policy: Policy, request: AdmissionRequest) -> bool:
    """Whether a pod's update is the policy's to judge, as the webhooks that send it see
    it: a class pod before or after (validate-updates), or a pod of no class the policy has
    an opinion on (validate-unclassed); a CPU pod's labels are its own."""
    label = policy.workload_label
    if any(label in _labels(obj) for obj in (request.object, request.old_object)):
        return True
    return gpu_relevant_pod(policy, request)


def _labels(obj: Any) -> dict[str, Any]:
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def _pod_rule(judges: dict[str, Judge], reads: Reads = pod_claim_sources) -> ResourceRule:
    return ResourceRule("", ("v1",), (PODS,), judges, reads=reads)


def _debug_rule(judge: Judge) -> ResourceRule:
    return ResourceRule("", ("v1",), (DEBUG_CONTAINERS,), {"UPDATE": judge})


def _unlabelled_gpu_relevance(policy: Policy) -> str:
    # The objectSelector has sent labelled pods elsewhere already.
    return gpu_relevance_condition(policy, labelled=False)


GPU_RELEVANT = Condition("gpu-relevant-pod", _unlabelled_gpu_relevance, gpu_relevant_pod)
JUDGED_CHANGE = Condition("judged-change", judged_change_condition, judged_change)

MUTATE = Handler(
    "mutate",
    mutating=True,
    rules=static(_pod_rule({"CREATE": mutate_pod_create}), _debug_rule(isolate_debug_containers)),
    summary="Injects what a class pod needs at its CREATE; hides the node's GPUs from "
    "debug containers added to it.",
    selector=CLASSED,
)
MUTATE_UNCLASSED = Handler(
    "mutate-unclassed",
    mutating=True,
    rules=static(_debug_rule(isolate_debug_containers)),
    summary="Hides the node's GPUs from debug containers added to a GPU-relevant pod of no class.",
    selector=UNCLASSED,
    conditions=(GPU_RELEVANT,),
)
VALIDATE = Handler(
    "validate",
    mutating=False,
    rules=static(
        _pod_rule({"CREATE": validate_pod_create}, pod_sources),
        _debug_rule(validate_debug_containers),
    ),
    summary="Refuses a class pod that breaks an enforced rule at its CREATE, and debug "
    "containers that pick GPUs by hand.",
    selector=CLASSED,
)
VALIDATE_UPDATES = Handler(
    "validate-updates",
    mutating=False,
    rules=static(_pod_rule({"UPDATE": validate_pod_update})),
    summary="Judges again a class pod whose update changes where it can land; refuses "
    "one that changes the labels it was admitted by or asks for CDI devices.",
    selector=CLASSED,
    conditions=(JUDGED_CHANGE,),
)
VALIDATE_UNCLASSED = Handler(
    "validate-unclassed",
    mutating=False,
    rules=static(
        _pod_rule({"CREATE": validate_pod_create, "UPDATE": validate_pod_update}, pod_sources),
        _debug_rule(validate_debug_containers),
    ),
    summary="Refuses a GPU-relevant pod of no class that breaks an enforced rule (a GPU "
    "asked for, a GPU pool tolerated, devices picked by hand).",
    selector=UNCLASSED,
    conditions=(GPU_RELEVANT, JUDGED_CHANGE),
)
