"""Builders of pods and admission requests for tests: plain dicts, as kube-apiserver sends them."""

from __future__ import annotations

from typing import Any

import jsonpatch

from webhook.engine import AdmissionRequest, Decision, Engine
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


def mutated(engine: Engine, obj: dict[str, Any], inventory: Inventory = UNKNOWN) -> dict[str, Any]:
    """The pod after our mutation, as kube-apiserver would apply the patch."""
    decision = engine.mutate(pod_create(obj), inventory)
    assert decision.allowed, decision.message
    result: dict[str, Any] = jsonpatch.apply_patch(obj, list(decision.patch))
    return result


def admitted(engine: Engine, obj: dict[str, Any], inventory: Inventory = UNKNOWN) -> Decision:
    """What a pod meets in a cluster: mutation, then validation of the mutated pod, both
    with the same view of the cluster."""
    return engine.validate(pod_create(mutated(engine, obj, inventory)), inventory)


def match_expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A node selector requirement (`values` left out when none are given)."""
    result: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        result["values"] = list(values)
    return result
