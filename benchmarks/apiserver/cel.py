"""The `cel` arm: no webhook, a MutatingAdmissionPolicy and a ValidatingAdmissionPolicy.

Both are written from the policy, in the scope of the shipped webhooks (pods of
opted-in namespaces, the same `gpu-relevant-pod` matchCondition, and the validating
one's `scheduling-changed`), and do in CEL what gpu-admission does for a pod of a
workload class:

- mutation (JSONPatch): a required node affinity to the class's pools, a toleration of
  each of their taints (appended to the tolerations kube-apiserver's
  DefaultTolerationSeconds plugin already added), the class's PriorityClass name and
  value (the Priority plugin has set `spec.priority` to 0 by then);
- validation: the class is known; no container sets the visible-devices variable; the
  PriorityClass is the class's, and a pod without a class uses none of the policy's;
  every required node-affinity term keeps the pod on the class's pools and a node
  selector on the pool label names one of them; no container asks for more whole GPUs
  than a node of those pools has.

That is a subset of the engine's rules (no MIG profiles, models, co-location, capacity
of the live inventory, exemptions, modes): CEL's cost for a comparable amount of work,
not a replacement. MutatingAdmissionPolicy is GA (v1, on by default) in Kubernetes
1.36, so kube-apiserver needs no feature gate or runtime-config for it.
"""

from __future__ import annotations

from typing import Any

from webhook.install.configurations import (
    gpu_relevance_condition,
    namespace_selector,
    scheduling_change_condition,
)
from webhook.policy import Policy
from webhook.policy.compiled import WorkloadClass

API_VERSION = "admissionregistration.k8s.io/v1"
NAME = "gpu-admission-cel"


def cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel_literal(value: Any, type_path: str) -> str:
    """``value`` (JSON) as a CEL literal whose objects are of the typed ``type_path``
    (``Object.spec.affinity``); list items take their list's path, as
    MutatingAdmissionPolicy names them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return cel_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(cel_literal(item, type_path) for item in value) + "]"
    if isinstance(value, dict):
        fields = ", ".join(f"{k}: {cel_literal(v, f'{type_path}.{k}')}" for k, v in value.items())
        return f"{type_path}{{{fields}}}"
    raise TypeError(f"no CEL literal for {value!r}")


def json_patch(op: str, path: str, value: Any) -> str:
    """A CEL JSONPatch; the value's type follows the path (indexes and `-` dropped)."""
    segments = [s for s in path.strip("/").split("/") if not (s.isdigit() or s == "-")]
    typed = cel_literal(value, "Object." + ".".join(segments))
    return f"JSONPatch{{op: {cel_string(op)}, path: {cel_string(path)}, value: {typed}}}"


def class_mutation(policy: Policy, workload: WorkloadClass) -> str:
    """CEL: the list of JSONPatch operations for a pod of ``workload``."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": policy.pool_label,
                                "operator": "In",
                                "values": list(workload.pool_label_values),
                            }
                        ]
                    }
                ]
            }
        }
    }
    tolerations = [
        {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
        for t in workload.taints
    ]
    appended = ", ".join(json_patch("add", "/spec/tolerations/-", t) for t in tolerations)
    whole = json_patch("add", "/spec/tolerations", tolerations)
    priority = workload.priority_class
    return (
        f"[{json_patch('add', '/spec/affinity', affinity)}]"
        f" + (has(object.spec.tolerations) ? [{appended}] : [{whole}])"
        f" + [{json_patch('add', '/spec/priorityClassName', priority.name)},"
        f" {json_patch('add', '/spec/priority', priority.value)}]"
    )


def _by_class(policy: Policy, of_class: Any, otherwise: str) -> str:
    expression = otherwise
    for name, workload in reversed(list(policy.classes.items())):
        expression = (
            f"variables.cls == {cel_string(name)} ? ({of_class(workload)}) : ({expression})"
        )
    return expression


def class_of_pod(policy: Policy) -> str:
    """CEL: the pod's workload class label, '' without one."""
    label = cel_string(policy.workload_label)
    expression = f"has(object.metadata.labels) && {label} in object.metadata.labels"
    return expression + f" ? object.metadata.labels[{label}] : ''"


def _class_variable(policy: Policy) -> dict[str, str]:
    return {"name": "cls", "expression": class_of_pod(policy)}


def _match_constraints(policy: Policy, operations: list[str]) -> dict[str, Any]:
    return {
        "resourceRules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": operations,
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ],
        "namespaceSelector": namespace_selector(policy, None),
        "matchPolicy": "Equivalent",
    }


def mutating_policy(policy: Policy) -> dict[str, Any]:
    classes = ", ".join(cel_string(name) for name in policy.classes)

    def mutation(workload: WorkloadClass) -> str:
        return class_mutation(policy, workload)

    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": NAME},
        "spec": {
            "matchConstraints": _match_constraints(policy, ["CREATE"]),
            "matchConditions": [
                {"name": "gpu-relevant-pod", "expression": gpu_relevance_condition(policy)},
                {
                    "name": "of-a-class",
                    "expression": f"({class_of_pod(policy)}) in [{classes}]",
                },
            ],
            "variables": [_class_variable(policy)],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [
                {
                    "patchType": "JSONPatch",
                    "jsonPatch": {
                        "expression": _by_class(policy, lambda w: class_mutation(policy, w), "[]")
                    },
                }
            ],
        },
    }


def _containers(expression: str) -> str:
    """CEL: ``expression`` (of ``c``) holds for every container and init container."""
    return " && ".join(
        f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {expression}))"
        for field in ("containers", "initContainers")
    )


def validations(policy: Policy) -> list[dict[str, str]]:
    classes = ", ".join(cel_string(name) for name in policy.classes)
    governed = ", ".join(cel_string(name) for name in sorted(policy.governed_priority_classes))
    env = cel_string(policy.visible_devices_env)
    pool_label = cel_string(policy.pool_label)
    gpu = cel_string(policy.gpu_resource)
    priority = _by_class(
        policy,
        lambda w: (
            f"has(object.spec.priorityClassName) && object.spec.priorityClassName == "
            f"{cel_string(w.priority_class.name)}"
        ),
        f"!has(object.spec.priorityClassName) || !(object.spec.priorityClassName in [{governed}])",
    )

    def pools(w: WorkloadClass) -> str:
        return "[" + ", ".join(cel_string(v) for v in w.pool_label_values) + "]"

    terms = "object.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    placement = _by_class(
        policy,
        lambda w: (
            f"has(object.spec.affinity) && has(object.spec.affinity.nodeAffinity) && "
            f"has({terms}) && {terms}.nodeSelectorTerms.all(t, has(t.matchExpressions) && "
            f"t.matchExpressions.exists(e, e.key == {pool_label} && e.operator == 'In' && "
            f"e.values.all(v, v in {pools(w)}))) && (!has(object.spec.nodeSelector) || "
            f"!({pool_label} in object.spec.nodeSelector) || "
            f"object.spec.nodeSelector[{pool_label}] in {pools(w)})"
        ),
        "true",
    )

    def largest_node(w: WorkloadClass) -> int:
        return max(policy.pools[p].gpus_per_node for p in w.pools)

    quantity = _by_class(
        policy,
        lambda w: _containers(
            f"!has(c.resources) || !has(c.resources.limits) || !({gpu} in c.resources.limits) || "
            f"quantity(c.resources.limits[{gpu}]).compareTo(quantity('{largest_node(w)}')) <= 0"
        ),
        "true",
    )
    return [
        {
            "expression": f"variables.cls == '' || variables.cls in [{classes}]",
            "message": "workload-class: unknown workload class",
        },
        {
            "expression": _containers(f"!has(c.env) || !c.env.exists(e, e.name == {env})"),
            "message": f"visible-devices: {policy.visible_devices_env} is set by the device plugin",
        },
        {"expression": priority, "message": "priority-class: not the class's PriorityClass"},
        {"expression": placement, "message": "pool-placement: outside the class's pools"},
        {"expression": quantity, "message": "gpu-quantity: more GPUs than a node of the pools has"},
    ]


def validating_policy(policy: Policy) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NAME},
        "spec": {
            "matchConstraints": _match_constraints(policy, ["CREATE", "UPDATE"]),
            "matchConditions": [
                {"name": "gpu-relevant-pod", "expression": gpu_relevance_condition(policy)},
                {"name": "scheduling-changed", "expression": scheduling_change_condition()},
            ],
            "variables": [_class_variable(policy)],
            "failurePolicy": "Fail",
            "validations": validations(policy),
        },
    }


def policy_objects(policy: Policy) -> list[dict[str, Any]]:
    """The two policies and their bindings, in the order to create them."""
    return [
        mutating_policy(policy),
        {
            "apiVersion": API_VERSION,
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": NAME},
            "spec": {"policyName": NAME},
        },
        validating_policy(policy),
        {
            "apiVersion": API_VERSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": NAME},
            "spec": {"policyName": NAME, "validationActions": ["Deny"]},
        },
    ]
