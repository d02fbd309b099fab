"""Builders of pods and admission requests for tests: plain dicts, as kube-apiserver sends them."""

from __future__ import annotations

from typing import Any

import jsonpatch

from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects
from webhook.engine.inventory import UNKNOWN, Inventory

WORKLOAD = "gpu-admission.io/workload"
GPU_MODEL = "gpu-admission.io/gpu-model"


def container(
    name: str = "app",
    *,
    gpus: int | str | None = None,
    limits: dict[str, Any] | None = None,
    requests: dict[str, Any] | None = None,
    env: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A container; `gpus` sets equal nvidia.com/gpu requests and limits."""
    result: dict[str, Any] = {"name": name, "image": "registry.example/app:1"}
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources = {
            "limits": {"nvidia.com/gpu": str(gpus)},
            "requests": {"nvidia.com/gpu": str(gpus)},
        }
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    if resources:
        result["resources"] = resources
    if env is not None:
        result["env"] = env
    result.update(extra)
    return result


def pod(
    workload: str | None = None,
    *,
    containers: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    name: str = "p",
    **spec: Any,
) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if workload is not None:
        all_labels[WORKLOAD] = workload
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": all_labels},
        "spec": {"containers": containers if containers is not None else [container()], **spec},
    }


def pod_create(obj: Any, **overrides: Any) -> AdmissionRequest:
    fields: dict[str, Any] = {
        "uid": "uid-1",
        "operation": "CREATE",
        "group": "",
        "version": "v1",
        "kind": "Pod",
        "resource": "pods",
        "subresource": "",
        "namespace": "ml",
        "name": "",
        "object": obj,
    }
    fields.update(overrides)
    return AdmissionRequest(**fields)


def mutated(
    engine: Engine,
    obj: dict[str, Any],
    inventory: Inventory = UNKNOWN,
    claims: ClaimObjects = NO_CLAIMS,
) -> dict[str, Any]:
    """The pod after our mutation, as kube-apiserver would apply the patch."""
    decision = engine.mutate(pod_create(obj), inventory, claims)
    assert decision.allowed, decision.message
    result: dict[str, Any] = jsonpatch.apply_patch(obj, list(decision.patch))
    return result


def admitted(
    engine: Engine,
    obj: dict[str, Any],
    inventory: Inventory = UNKNOWN,
    claims: ClaimObjects = NO_CLAIMS,
) -> Decision:
    """What a pod meets in a cluster: mutation, then validation of the mutated pod, both
    with the same view of the cluster (and of the templates and claims it names)."""
    mutated_pod = mutated(engine, obj, inventory, claims)
    return engine.validate(pod_create(mutated_pod), inventory, claims=claims)


def match_expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A node selector requirement (`values` left out when none are given)."""
    result: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        result["values"] = list(values)
    return result


def claim_spec(
    device_class: str = "gpu.nvidia.com",
    *,
    count: int | None = None,
    all_devices: bool = False,
    selectors: list[str] | None = None,
    request: str = "gpu",
) -> dict[str, Any]:
    """A ResourceClaim's spec with one request of `device_class` (`selectors` are CEL)."""
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if all_devices:
        exactly["allocationMode"] = "All"
    if count is not None:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"devices": {"requests": [{"name": request, "exactly": exactly}]}}


def claim_template(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate of `spec` (one whole GPU when left out)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"spec": spec if spec is not None else claim_spec()},
    }


def claiming_container(name: str = "app", *claims: str, **extra: Any) -> dict[str, Any]:
    """A container using the pod's claims named `claims` (`gpu` when none are given)."""
    used = [{"name": claim} for claim in claims or ("gpu",)]
    resources = extra.pop("resources", {})
    return container(name, resources={**resources, "claims": used}, **extra)


def claim_objects(*objects: dict[str, Any]) -> ClaimObjects:
    """The cluster's templates and claims: `objects`, and no other."""
    return ClaimObjects(
        found={ClaimSource(o["kind"], o["metadata"]["name"]): o for o in objects},
    )


def from_templates(**claims: str) -> list[dict[str, Any]]:
    """A pod's `spec.resourceClaims`: claim name -> its ResourceClaimTemplate."""
    return [{"name": name, "resourceClaimTemplateName": t} for name, t in claims.items()]


def dra_engine() -> Engine:
    """The default policy with inference on DRA and training on both."""
    from webhook.policy.load import default_policy_text, load_policy_text

    text = default_policy_text()
    text = text.replace("gpusThrough: devicePlugin", "gpusThrough: dra", 1)
    text = text.replace("gpusThrough: devicePlugin", "gpusThrough: both", 1)
    return Engine(load_policy_text(text, "dra.yaml"))


def claiming_pod(workload: str | None = "inference", **claims: str) -> dict[str, Any]:
    """A pod whose one container uses its claims, each from the template named
    (`gpu` from template one-gpu when none are given)."""
    claims = claims or {"gpu": "one-gpu"}
    return pod(
        workload,
        containers=[claiming_container("app", *claims)],
        resourceClaims=from_templates(**claims),
    )


def tenant_replica_set(name: str, value_bytes: int) -> dict[str, Any]:
    """A ReplicaSet of zero replicas (never sent to a webhook) carrying one environment
    value of `value_bytes`: what any tenant may store for the audit to read."""
    labels = {"app": name}
    env = [{"name": "BLOB", "value": "x" * value_bytes}]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "busybox", "env": env}]},
            },
        },
    }
