"""Rules: GPU pods need a workload class; a class label must name a class."""

from __future__ import annotations

from webhook.engine.decision import Violation, shorten
from webhook.policy.compiled import Policy

RULE = "workload-class"


def missing_class(policy: Policy, resources: list[str]) -> Violation:
    return Violation(
        RULE,
        f"pod requests {shorten(', '.join(resources))} but has no label {policy.workload_label}; "
        f"set it to one of: {', '.join(policy.classes)}",
    )


def unknown_class(policy: Policy, value: str) -> Violation:
    return Violation(
        RULE,
        f"label {policy.workload_label}={shorten(value)} names no workload class; "
        f"use one of: {', '.join(policy.classes)}",
    )
