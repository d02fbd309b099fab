"""The PriorityClasses a policy's classes name, as the objects every install creates.

A class's pods are given its ``priorityClass`` by the mutating webhook, so the class
must exist before the first of them is created: kube-apiserver's Priority admission
refuses a pod naming a PriorityClass that does not. The objects are written from the
policy the install serves (``gpu-admission install``, the chart's ``webhookScope``,
``manifests overlay`` and the base's generated ``priorityclasses.yaml``), never copied
from the default policy's two.

``globalDefault`` stays false: pods outside gpu-admission's scope keep the cluster's own
default.
"""

from __future__ import annotations

from typing import Any

from webhook.install.names import APP_LABELS
from webhook.policy import Policy

__all__ = ["DEFAULT_PREEMPTION", "priority_class_objects", "priority_class_specs"]

DEFAULT_PREEMPTION = "PreemptLowerPriority"
"""What a PriorityClass without ``preemptionPolicy`` is defaulted to by kube-apiserver."""


def priority_class_specs(policy: Policy) -> list[dict[str, Any]]:
    """Each PriorityClass the policy's classes name, once, in the policy's class order:
    name, value, preemptionPolicy and a description naming the classes that use it.
    (The policy refuses two classes that give one name two values.)"""
    users: dict[str, list[str]] = {}
    specs: dict[str, dict[str, Any]] = {}
    for workload in policy.classes.values():
        wanted = workload.priority_class
        users.setdefault(wanted.name, []).append(workload.name)
        specs.setdefault(
            wanted.name,
            {
                "name": wanted.name,
                "value": wanted.value,
                "preemptionPolicy": wanted.preemption_policy or DEFAULT_PREEMPTION,
            },
        )
    for name, spec in specs.items():
        classes = ", ".join(users[name])
        noun = "class" if len(users[name]) == 1 else "classes"
        spec["description"] = f"Pods of the gpu-admission workload {noun} {classes}."
    return list(specs.values())


def priority_class_objects(policy: Policy) -> list[dict[str, Any]]:
    """The PriorityClass objects of ``priority_class_specs``, labelled as every installed
    object is."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": spec["name"], "labels": dict(APP_LABELS)},
            "value": spec["value"],
            "globalDefault": False,
            "preemptionPolicy": spec["preemptionPolicy"],
            "description": spec["description"],
        }
        for spec in priority_class_specs(policy)
    ]
