"""The Kubernetes side of autoscaler warnings: reading the workload an autoscaler scales.

The target is read as plain JSON, the way admission requests carry objects, so
the engine (webhook.engine.autoscalers) reads it like any workload. Only kinds
whose pod templates we know are read, through the generic
``/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}`` path with the
plural those kinds name: no discovery round trips while a review waits.
"""

from __future__ import annotations

from typing import Any

from webhook.engine.autoscalers import ScaleTarget, target_kind
from webhook.engine.templates import BUILT_IN_KINDS, TemplateKind
from webhook.kube.reads import read_namespaced

__all__ = ["TIMEOUT_SECONDS", "fetch_scale_target"]

TIMEOUT_SECONDS = 2.0
"""Well within the webhook's own timeout, so a slow API server costs a warning, not the review."""


def fetch_scale_target(
    api: Any,
    target: ScaleTarget,
    kinds: tuple[TemplateKind, ...] = BUILT_IN_KINDS,
    *,
    timeout: float = TIMEOUT_SECONDS,
) -> dict[str, Any] | None:
    """The object `target` names, as a JSON dict.

    None without an API call when its kind is not among `kinds` (no pod template
    we could read); None when it does not exist (yet) or the cluster does not
    serve its kind (both 404). Other API errors, and timeouts, raise.
    """
    kind = target_kind(target, kinds)
    if kind is None or not kind.resource or not kind.group or not target.version:
        return None
    return read_namespaced(
        api,
        kind.group,
        target.version,
        target.namespace,
        kind.resource,
        target.name,
        timeout=timeout,
    )
