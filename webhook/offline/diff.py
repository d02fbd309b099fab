"""The mutation as people review it: a unified diff of the pod's YAML before and after."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from webhook.offline.yaml_text import dump_yaml


def as_yaml(obj: Mapping[str, Any]) -> str:
    """YAML in the object's own key order, as `kubectl get -o yaml` would show it."""
    return dump_yaml(dict(obj))


def mutation_diff(before: Mapping[str, Any], after: Mapping[str, Any], label: str) -> str:
    """A unified diff from `before` to `after`; empty when they are equal."""
    lines = difflib.unified_diff(
        as_yaml(before).splitlines(keepends=True),
        as_yaml(after).splitlines(keepends=True),
        fromfile=f"{label} (received)",
        tofile=f"{label} (mutated)",
    )
    return "".join(lines)
