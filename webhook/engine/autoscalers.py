"""Autoscalers that can scale a GPU workload beyond what its pools have now.

A HorizontalPodAutoscaler (autoscaling/v1, v2) or a KEDA ScaledObject
(keda.sh/v1alpha1) is admitted whatever it says; when its maximum times the GPUs
of one replica exceeds the GPUs its workload's pools have now (allocatable
summed over their schedulable nodes), it is admitted with a warning naming the
largest maximum that could still schedule. Each kind of autoscaler is declared once,
as an `AutoscalerKind` saying where its target and maximum are and what it means by
what it leaves out; one reader (`scale_target`) reads them all.

A replica is the pod the target's single pod template becomes: requests
defaulted from limits by kube-apiserver, then our mutation (the class's default
GPU count, ...). Nothing is warned of while any pool of the class is unknown
(see webhook.engine.capacity.now), nor for odd shapes: a field of the wrong type
means no warning, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from webhook.engine.capacity.now import CapacityNow, PoolNow
from webhook.engine.decision import warning, within_limits
from webhook.engine.mutate import created_pod
from webhook.engine.patch import PatchConflict
from webhook.engine.pod import PodView
from webhook.engine.quantities import format_count
from webhook.engine.request import AdmissionRequest, within
from webhook.engine.resources import effective_gpu_request
from webhook.engine.templates import (
    CONTROLLER_KINDS,
    POD,
    TemplateKind,
    api_group,
    pod_from_template,
    pod_templates,
    template_kind,
)
from webhook.errors import MalformedObject
from webhook.policy.compiled import Policy, Pool, WorkloadClass

TARGET_MAX_VALUES = 20_000
"""The most JSON values of a scaled workload judged for a warning: real ones hold hundreds
to a few thousand; at 20,000 judging it takes tens of milliseconds, not the half second
a 100,000-value Deployment would hold up every review behind it."""

KEDA_DEFAULT_MAX_REPLICAS = 100
"""KEDA's `spec.maxReplicaCount` when left out."""

APPS_KINDS = {k.kind: f"{k.group}/v1" for k in CONTROLLER_KINDS if k.group == "apps"}
"""The apiVersion of an HPA's target that leaves it out (it is optional), by kind."""


@dataclass(frozen=True, slots=True)
class AutoscalerKind:
    """Where an autoscaler of one kind says what it scales and up to how many replicas,
    and what it means by what it leaves out. Its target is the reference in
    `spec.<target_ref>` (`apiVersion`, `kind`, `name`); its maximum is
    `spec.<max_replicas>`."""

    group: str
    kind: str
    max_replicas: str
    """The field of `spec` holding the most replicas it scales to."""
    default_max_replicas: int | None = None
    """That maximum when the field is left out; None: it is required."""
    default_target_kind: str = ""
    """The target's kind when the reference leaves it out; empty: it is required."""
    target_api_versions: Mapping[str, str] = field(default_factory=dict)
    """The target's apiVersion when the reference leaves it out, by the target's kind."""
    default_target_api_version: str = ""
    """The same for a kind not in `target_api_versions`; empty: unknown (never fetched)."""
    target_ref: str = "scaleTargetRef"

    def target_api_version(self, kind: str) -> str:
        """The apiVersion of a target of `kind` whose reference leaves it out."""
        return self.target_api_versions.get(kind, self.default_target_api_version)


HORIZONTAL_POD_AUTOSCALER = AutoscalerKind(
    group="autoscaling",
    kind="HorizontalPodAutoscaler",
    max_replicas="maxReplicas",
    target_api_versions=APPS_KINDS,
)
KEDA_SCALED_OBJECT = AutoscalerKind(
    group="keda.sh",
    kind="ScaledObject",
    max_replicas="maxReplicaCount",
    default_max_replicas=KEDA_DEFAULT_MAX_REPLICAS,
    default_target_kind="Deployment",
    default_target_api_version="apps/v1",
)
AUTOSCALER_KINDS = (HORIZONTAL_POD_AUTOSCALER, KEDA_SCALED_OBJECT)
"""The autoscalers read (autoscaling/v1 and v2 HPAs, keda.sh/v1alpha1 ScaledObjects)."""


@dataclass(frozen=True, slots=True)
class ScaleTarget:
    """What an autoscaler scales, and up to how many replicas."""

    autoscaler_kind: str
    """The autoscaler's kind: `HorizontalPodAutoscaler`, `ScaledObject`."""
    autoscaler_name: str
    namespace: str
    api_version: str
    """The target's apiVersion, e.g. `apps/v1`; for an HPA that leaves it out, `apps/v1`
    for the apps kinds and empty otherwise."""
    kind: str
    name: str
    max_replicas: int
    max_replicas_field: str = HORIZONTAL_POD_AUTOSCALER.max_replicas
    """The autoscaler's field that sets `max_replicas`, as a warning names it."""

    @property
    def group(self) -> str:
        """The target's API group: `apps` of `apps/v1`."""
        return api_group(self.api_version)

    @property
    def version(self) -> str:
        """The target's API version: `v1` of `apps/v1`."""
        return self.api_version.rsplit("/", 1)[-1]


def scale_target(
    request: AdmissionRequest, autoscalers: Sequence[AutoscalerKind] = AUTOSCALER_KINDS
) -> ScaleTarget | None:
    """The target of an autoscaler of one of `autoscalers` being created or updated; None
    for any other request, and for an autoscaler whose fields are missing or oddly typed."""
    if request.operation not in ("CREATE", "UPDATE") or request.subresource:
        return None
    autoscaler = _autoscaler_kind(request, autoscalers)
    obj = request.object
    if autoscaler is None or not isinstance(obj, Mapping):
        return None
    metadata = _mapping(obj.get("metadata"))
    name = request.name or _text(metadata.get("name")) or _text(metadata.get("generateName"))
    namespace = request.namespace or _text(metadata.get("namespace"))
    spec = _mapping(obj.get("spec"))
    ref = _mapping(spec.get(autoscaler.target_ref))
    target_name = _text(ref.get("name"))
    kind = ref.get("kind") or autoscaler.default_target_kind
    if not (name and namespace and target_name and isinstance(kind, str) and kind):
        return None
    api_version = ref.get("apiVersion") or autoscaler.target_api_version(kind)
    if not isinstance(api_version, str):
        return None
    max_replicas = spec.get(autoscaler.max_replicas)
    if max_replicas is None:
        max_replicas = autoscaler.default_max_replicas
    if not isinstance(max_replicas, int) or isinstance(max_replicas, bool) or max_replicas < 1:
        return None
    return ScaleTarget(
        autoscaler_kind=autoscaler.kind,
        autoscaler_name=name,
        namespace=namespace,
        api_version=api_version,
        kind=kind,
        name=target_name,
        max_replicas=max_replicas,
        max_replicas_field=autoscaler.max_replicas,
    )


def _autoscaler_kind(
    request: AdmissionRequest, autoscalers: Sequence[AutoscalerKind]
) -> AutoscalerKind | None:
    found = (a for a in autoscalers if (a.group, a.kind) == (request.group, request.kind))
    return next(found, None)


def target_kind(target: ScaleTarget, kinds: tuple[TemplateKind, ...]) -> TemplateKind | None:
    """The kind among `kinds` (not Pod) that `target` names, or None: worth fetching only then."""
    kind = template_kind({"apiVersion": target.api_version, "kind": target.kind}, kinds)
    return None if kind is None or kind is POD else kind


def autoscaler_warnings(
    policy: Policy,
    target: ScaleTarget,
    workload: Mapping[str, Any] | None,
    capacity: CapacityNow,
    kinds: tuple[TemplateKind, ...],
) -> list[str]:
    """A warning per GPU resource of which `target.max_replicas` replicas of `workload`
    (the target as read from the cluster; None when absent) need more than the
    workload's class's pools have now. Empty when anything needed is not known."""
    if not isinstance(workload, Mapping):
        return []
    kind = target_kind(target, kinds)
    if kind is None or template_kind(workload, kinds) != kind:
        return []
    replica = _replica(policy, workload, kind)
    if replica is None:
        return []
    pod, workload_class = replica
    requested = effective_gpu_request(policy, pod)
    if not requested:
        return []
    model = workload_class.pinned_model(pod.labels.get(policy.gpu_model_label))
    pools = policy.pools_for(workload_class, model)
    known = _known_pools(pools, model, capacity)
    if not known:
        return []
    warnings = []
    for resource in sorted(requested, key=lambda r: (r != policy.gpu_resource, r)):
        per_replica = requested[resource] * _pods_per_replica(workload, kind)
        available = sum((pool.total_of(resource, model) for pool in known), Decimal(0))
        if target.max_replicas * per_replica > available:
            warnings.append(_warning(target, resource, per_replica, known, available))
    return list(within_limits(warnings))


def _pods_per_replica(workload: Mapping[str, Any], kind: TemplateKind) -> int:
    """Pods one unit of the scale subresource is: a LeaderWorkerSet scales groups of
    `spec.leaderWorkerTemplate.size` pods (all from the worker template when it has no
    leader template); every other kind scales pods."""
    if (kind.group, kind.kind) != ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"):
        return 1
    size = _mapping(_mapping(workload.get("spec")).get("leaderWorkerTemplate")).get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 1


def _known_pools(pools: list[Pool], model: str | None, capacity: CapacityNow) -> list[PoolNow]:
    """The pools as they are now, or none when any of them, or any model a replica may
    use, has no node now (scaled to zero, say: the autoscaler could add nodes)."""
    known = []
    for pool in pools:
        pool_now = capacity.pool(pool.name)
        if pool_now is None:
            return []
        if (model not in pool_now.models) if model is not None else pool_now.unseen:
            return []
        known.append(pool_now)
    return known


def _replica(
    policy: Policy, workload: Mapping[str, Any], kind: TemplateKind
) -> tuple[PodView, WorkloadClass] | None:
    """The pod one replica of `workload` is, after defaulting and our mutation, with its
    class; None without exactly one template, a known class, or a readable pod. A target
    larger than any real workload is not judged: its review came in a small body, judged
    where small bodies are, and only a warning hangs on it."""
    if not within(workload, TARGET_MAX_VALUES):
        return None
    try:
        templates = pod_templates(workload, kind)
        if len(templates) != 1:
            return None
        pod = created_pod(policy, pod_from_template(templates[0][1]))
    except (MalformedObject, PatchConflict):
        return None
    workload_class = policy.classes.get(pod.labels.get(policy.workload_label, ""))
    return None if workload_class is None else (pod, workload_class)


def _warning(
    target: ScaleTarget,
    resource: str,
    per_replica: Decimal,
    pools: list[PoolNow],
    available: Decimal,
) -> str:
    names = ", ".join(pool.name for pool in pools)
    where = f"pool {names} has" if len(pools) == 1 else f"pools {names} have"
    fits = int(available // per_replica)
    wanted = target.max_replicas * per_replica
    replicas = "replica" if target.max_replicas == 1 else "replicas"
    scales = (
        f"{target.autoscaler_kind} {target.autoscaler_name} can scale "
        f"{target.kind} {target.name} to {target.max_replicas} {replicas} of "
        f"{format_count(per_replica)} {resource} ({format_count(wanted)}); "
        f"{where} {format_count(available)} allocatable now"
    )
    if fits == 0:
        advice = f"so no replica could ever schedule; add nodes with {resource}"
    else:
        advice = (
            f"so replicas beyond {fits} could never schedule; "
            f"lower {target.max_replicas_field} to {fits} or add nodes"
        )
    return warning(f"{scales}, {advice}")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
