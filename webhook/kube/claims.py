"""The Kubernetes side of what a review names: the ResourceClaimTemplates and
ResourceClaims a pod under review names, the pod a binding under review names, and the
key names of the ConfigMaps and Secrets a pod's containers take whole (their values are
dropped as soon as they are read: only the names are kept, judged or logged).

Read as plain JSON (``webhook.kube.reads``) from ``resource.k8s.io/v1``, so the engine
reads them like the object under review. A read takes at most ``timeout`` seconds; the
caller bounds the whole wait.
"""

from __future__ import annotations

from typing import Any

from webhook.engine.binding import BOUND_POD
from webhook.engine.dra.api import CLAIMS, GROUP, PLURALS, VERSION
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.env_references import CONFIG_MAP, SECRET, key_names
from webhook.kube.reads import ObjectTooLarge, read_core, read_namespaced

__all__ = [
    "MAX_OBJECT_BYTES",
    "MAX_POD_BYTES",
    "TIMEOUT_SECONDS",
    "ObjectTooLarge",
    "fetch_claim_object",
]

TIMEOUT_SECONDS = 2.0
"""Well within the webhook's own timeout."""

MAX_OBJECT_BYTES = 128 * 1024
"""The largest template or claim read. One for GPUs is a few KiB; a shared ResourceClaim
with its status (allocation, 256 consumers at most, devices' data) and managed fields
stays well under this. A review reads up to 64 at once, so a tenant's 1.5 MiB templates
cannot make one review hold a hundred MiB: a larger one is not read, and the pod naming
it is refused with why."""

MAX_POD_BYTES = 3 * 1024 * 1024
"""The largest pod read, for its binding: kube-apiserver takes no request body over 3 MiB,
so no pod is refused for its size. The service reads few at once (``CONCURRENT_POD_READS``
of ``webhook.http.claim_reader``)."""

MAX_ENV_OBJECT_BYTES = MAX_POD_BYTES
"""The largest ConfigMap or Secret read for its key names: kube-apiserver stores them with
up to 1 MiB of data, so none is refused for its size. Read with the pods' few threads."""

ENV_PLURALS = {CONFIG_MAP: "configmaps", SECRET: "secrets"}


def fetch_claim_object(
    api: Any, namespace: str, source: ClaimSource, *, timeout: float = TIMEOUT_SECONDS
) -> dict[str, Any] | None:
    """The template or claim `source` names in `namespace`, as a JSON dict; None when it
    does not exist (404). Other API errors, and timeouts, raise; so does one over
    `MAX_OBJECT_BYTES` (ObjectTooLarge). The pod a binding names (``BOUND_POD``) is read
    the same way, up to ``MAX_POD_BYTES``."""
    if source.kind == BOUND_POD:
        return read_core(
            api, namespace, "pods", source.name, timeout=timeout, max_bytes=MAX_POD_BYTES
        )
    if source.kind in ENV_PLURALS:
        plural = ENV_PLURALS[source.kind]
        found = read_core(
            api, namespace, plural, source.name, timeout=timeout, max_bytes=MAX_ENV_OBJECT_BYTES
        )
        return None if found is None else key_names(found)
    plural = PLURALS.get(source.kind, CLAIMS)
    return read_namespaced(
        api,
        GROUP,
        VERSION,
        namespace,
        plural,
        source.name,
        timeout=timeout,
        max_bytes=MAX_OBJECT_BYTES,
    )
