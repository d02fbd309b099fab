"""The demo's cluster and examples for any policy: the default policy's world, said in
another policy's words.

The fleet of ``nodes.FLEET`` is hardware (DGX A100 40GB nodes with MIG, DGX-1 V100 and DGX
A100 80GB nodes, CPU nodes) labelled as GPU Feature Discovery labels it
(``nvidia.com/gpu.product`` and the rest), and as the default policy's cluster names its
pools. A platform team's cluster has the same hardware under its own names: its node
groups carry the team's pool label (a provider's node-group label, say), its GPU product
label is GFD's or one the team writes, its pools are tainted as the team taints them (or
not at all). ``fleet_for`` gives the fleet those names: the policy's pools in order take
the fleet's pools in order (inference, training), each node keeps its GFD labels, and a
model label other than GFD's gets the policy's model whose product the node's GPU is.

``examples_for`` does the same for examples/: the default policy's classes in order
become the policy's classes in order, and with them its workload and model labels, its
PriorityClass names, its pool label and values, and its GPU resource names. An example
whose meaning has no equivalent (a class pinned to a model its new pools lack) keeps what
it can, and the demo shows the answer kube-apiserver gives it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from webhook.policy import Policy, load_default_policy

from .admission_fixtures import EXAMPLES
from .nodes import FLEET, MODEL_LABEL, POOL_LABEL, PRODUCT_LABEL, NodeSpec, Taint

__all__ = ["examples_for", "fleet_for", "pool_of_node"]


def _pool_pairs(policy: Policy) -> dict[str, str]:
    """Default pool name -> the policy's pool name, by position."""
    default = load_default_policy()
    return dict(zip(default.pools, policy.pools, strict=False))


def _class_pairs(policy: Policy) -> dict[str, str]:
    """Default class name -> the policy's class name, by position."""
    default = load_default_policy()
    return dict(zip(default.classes, policy.classes, strict=False))


def _resource(name: str, policy: Policy) -> str:
    default = load_default_policy()
    if name == default.gpu_resource:
        return policy.gpu_resource
    if name.startswith(default.mig_prefix):
        return policy.mig_prefix + name.removeprefix(default.mig_prefix)
    return name


def fleet_for(policy: Policy) -> tuple[NodeSpec, ...]:
    """``FLEET`` as the cluster `policy` describes names it (see the module's docstring).
    Nodes of a pool the policy has no counterpart for are left out."""
    pools = _pool_pairs(policy)
    fleet = []
    for node in FLEET:
        if node.pool is None:
            fleet.append(node)
            continue
        if node.pool not in pools:
            continue
        pool = policy.pools[pools[node.pool]]
        labels = {k: v for k, v in node.labels.items() if k not in (POOL_LABEL, MODEL_LABEL)}
        labels[policy.pool_label] = pool.label_value
        if policy.model_label != PRODUCT_LABEL:
            model = pool.model_of_product(node.labels[PRODUCT_LABEL])
            if model is not None:
                labels[policy.model_label] = model
        capacity = {_resource(k, policy): v for k, v in node.capacity.items()}
        taints = tuple(Taint(t.key, t.value, t.effect) for t in pool.taints)
        fleet.append(replace(node, labels=labels, capacity=capacity, taints=taints))
    return tuple(fleet)


def pool_of_node(policy: Policy, labels: Mapping[str, str]) -> str:
    """The policy's pool a node's labels put it in, or ``cpu`` for a node of none."""
    value = labels.get(policy.pool_label)
    for pool in policy.pools.values():
        if value is not None and value == pool.label_value:
            return pool.name
    return "cpu"


def _pod_specs(obj: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(metadata, spec) of a Pod and of the pod template of a workload."""
    if obj.get("kind") == "Pod":
        yield obj.setdefault("metadata", {}), obj.setdefault("spec", {})
        return
    template = obj.get("spec", {}).get("template")
    if isinstance(template, dict):
        yield template.setdefault("metadata", {}), template.setdefault("spec", {})


def _translated(obj: dict[str, Any], policy: Policy) -> dict[str, Any]:
    default = load_default_policy()
    classes, pools = _class_pairs(policy), _pool_pairs(policy)
    priority = {
        default.classes[d].priority_class.name: policy.classes[p].priority_class.name
        for d, p in classes.items()
    }
    obj = copy.deepcopy(obj)
    for metadata, spec in _pod_specs(obj):
        labels = metadata.get("labels") or {}
        workload = labels.pop(default.workload_label, None)
        if workload is not None:
            labels[policy.workload_label] = classes.get(workload, workload)
        model = labels.pop(default.gpu_model_label, None)
        if model is not None:
            labels[policy.gpu_model_label] = _model(policy, default, classes.get(workload), model)
        if "priorityClassName" in spec:
            spec["priorityClassName"] = priority.get(
                spec["priorityClassName"], spec["priorityClassName"]
            )
        selector = spec.get("nodeSelector") or {}
        if default.pool_label in selector:
            pool = pools.get(selector.pop(default.pool_label))
            if pool is not None:
                selector[policy.pool_label] = policy.pools[pool].label_value
        for container in spec.get("containers", []):
            for kind in ("limits", "requests"):
                amounts = container.get("resources", {}).get(kind)
                if amounts:
                    container["resources"][kind] = {
                        _resource(k, policy): v for k, v in amounts.items()
                    }
            for variable in container.get("env", []):
                if variable.get("name") == default.visible_devices_env:
                    variable["name"] = policy.visible_devices_env
    return obj


def _model(policy: Policy, default: Policy, workload: str | None, model: str) -> str:
    """The policy's model of the class's pools with the GPU product the default model of
    that name has in the default class's pools."""
    if workload is None:
        return model
    default_class = next(d for d, p in _class_pairs(policy).items() if p == workload)
    products = [
        m.product
        for pool in default.classes[default_class].pools
        for m in default.pools[pool].models.values()
        if m.name == model and m.product
    ]
    for pool in policy.classes[workload].pools:
        for product in products:
            found = policy.pools[pool].model_of_product(product)
            if found is not None:
                return found
    return model


def examples_for(policy: Policy, directory: Path) -> Path:
    """examples/ (its top files and denied/) in `policy`'s words, written under
    `directory`; the folder written (comments are not kept)."""
    target = directory / "examples"
    for source in [*EXAMPLES.glob("*.yaml"), *(EXAMPLES / "denied").glob("*.yaml")]:
        documents = [
            _translated(o, policy) if o else o
            for o in yaml.safe_load_all(source.read_text("utf-8"))
        ]
        written = target / source.relative_to(EXAMPLES)
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(yaml.safe_dump_all(documents, sort_keys=False), "utf-8")
    return target
