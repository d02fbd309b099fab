"""The Kubernetes side of claimed GPUs: reading the ResourceClaimTemplates and
ResourceClaims a pod under review names.

Read as plain JSON (``webhook.kube.reads``) from ``resource.k8s.io/v1``, so the engine
reads them like the object under review. A read takes at most ``timeout`` seconds; the
caller bounds the whole wait.
"""

from __future__ import annotations

from typing import Any

from webhook.engine.claims import TEMPLATE, ClaimSource
from webhook.kube.reads import read_namespaced

__all__ = ["RESOURCE_GROUP", "RESOURCE_VERSION", "TIMEOUT_SECONDS", "fetch_claim_object"]

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSION = "v1"
TIMEOUT_SECONDS = 2.0
"""Well within the webhook's own timeout."""

PLURALS = {TEMPLATE: "resourceclaimtemplates"}
"""The plural of each kind a pod names; a ResourceClaim otherwise."""


def fetch_claim_object(
    api: Any, namespace: str, source: ClaimSource, *, timeout: float = TIMEOUT_SECONDS
) -> dict[str, Any] | None:
    """The template or claim `source` names in `namespace`, as a JSON dict; None when it
    does not exist (404). Other API errors, and timeouts, raise."""
    plural = PLURALS.get(source.kind, "resourceclaims")
    return read_namespaced(
        api, RESOURCE_GROUP, RESOURCE_VERSION, namespace, plural, source.name, timeout=timeout
    )
