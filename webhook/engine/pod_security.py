"""Whether a namespace's Pod Security admission enforces at least `baseline`.

`baseline` forbids hostPath volumes, privileged containers and added capabilities
beyond its list: the ways to a node's devices that gpu-admission's own rules close only
for the pods they judge (pods of a class, GPU pods). An opted-in namespace that
enforces less leaves the pods its webhooks never see (a CPU pod mounting the node's
container runtime socket, say) to the cluster's other defences, so the audit and the
service's readiness detail name it. Read from the namespace's
`pod-security.kubernetes.io/enforce` label; without one the cluster's default applies,
which is `privileged` unless kube-apiserver's admission configuration says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
AT_LEAST_BASELINE = frozenset({"baseline", "restricted"})


def below_baseline(labels: Mapping[str, Any] | None) -> str | None:
    """Why a namespace with `labels` is not known to enforce `baseline`, or None if it
    does."""
    level = (labels or {}).get(ENFORCE_LABEL)
    if level in AT_LEAST_BASELINE:
        return None
    if level is None:
        return (
            f"no {ENFORCE_LABEL} label: the cluster's default level applies "
            "(privileged unless configured)"
        )
    return f"{ENFORCE_LABEL}={level}"
