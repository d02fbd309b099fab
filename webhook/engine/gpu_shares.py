"""GPU shares a pod asks for by annotation rather than by resource: the fractions of the
NVIDIA KAI Scheduler.

KAI reads a GPU share from the pod's annotations (KAI-Scheduler@72de64fc,
``pkg/common/constants/constants.go``): ``gpu-fraction`` (a part of one GPU, over 0 and
under 1), or ``gpu-memory`` (MiB of one GPU), with ``gpu-fraction-num-devices`` (how
many GPUs get that share, only beside one of the two). Such a pod asks for no
``nvidia.com/gpu``, and KAI's binder refuses one that also has it in its limits
(``ValidateGpuRequests``, ``pkg/binder/plugins/gpusharing/gpu-request/
gpu_request_validator.go``). So a pod asking for a share is a GPU pod: judged as one
without a class, and never given the class's default of whole GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_DEVICES = "gpu-fraction-num-devices"

SHARE_ANNOTATIONS = (KAI_FRACTION, KAI_MEMORY)
"""The annotations that ask for a share; ``gpu-fraction-num-devices`` only counts them."""


def shares_asked(pod: Any) -> list[str]:
    """The share annotations `pod` (as JSON) carries, with their values (``gpu-fraction=0.5``),
    in the order of ``SHARE_ANNOTATIONS``."""
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return []
    return [f"{key}={annotations[key]}" for key in SHARE_ANNOTATIONS if key in annotations]
