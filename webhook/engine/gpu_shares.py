"""GPU shares a pod asks for other than whole GPUs: the fractions of the NVIDIA KAI
Scheduler (by annotation) and Volcano's vGPUs (by resource).

KAI reads a GPU share from the pod's annotations (KAI-Scheduler@72de64fc,
``pkg/common/constants/constants.go``): ``gpu-fraction`` (a part of one GPU, over 0 and
under 1), or ``gpu-memory`` (MiB of one GPU), with ``gpu-fraction-num-devices`` (how
many GPUs get that share, only beside one of the two). Such a pod asks for no
``nvidia.com/gpu``, and KAI's binder refuses one that also has it in its limits
(``ValidateGpuRequests``, ``pkg/binder/plugins/gpusharing/gpu-request/
gpu_request_validator.go``).

Volcano's vGPU device plugin (volcano-vgpu-device-plugin@4fb76ba1) advertises and
pods ask for ``volcano.sh/vgpu-number`` (vGPUs, each GPU split ten ways by default),
``volcano.sh/vgpu-memory`` (MiB), ``volcano.sh/vgpu-cores`` (percent of a GPU) and
``volcano.sh/vgpu-memory-percentage``; its nodes advertise no ``nvidia.com/gpu``.

So a pod asking for a share is a GPU pod: judged as one without a class, never given
the class's default of whole GPUs, and, in a class, refused unless a pool of its class
shares its GPUs that way (``Pool.sharing``; rule gpu-sharing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KAI_FRACTIONS = "kaiFractions"
VOLCANO_VGPU = "volcanoVgpu"
MECHANISMS = {KAI_FRACTIONS: "the KAI Scheduler's GPU fractions", VOLCANO_VGPU: "Volcano vGPUs"}

KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_DEVICES = "gpu-fraction-num-devices"

SHARE_ANNOTATIONS = (KAI_FRACTION, KAI_MEMORY)
"""The annotations that ask for a share; ``gpu-fraction-num-devices`` only counts them."""

FIXED_ANNOTATIONS = (*SHARE_ANNOTATIONS, KAI_DEVICES)
"""The annotations that say a pod's share, fixed at its CREATE: KAI reads them when it
schedules the pod, so one added to a pending pod of no class would get it a GPU."""

VOLCANO_PREFIX = "volcano.sh/vgpu-"
"""``volcano.sh/vgpu-number``, ``-memory``, ``-cores`` and ``-memory-percentage``."""

_CONTAINER_LISTS = ("initContainers", "containers")


@dataclass(frozen=True, slots=True)
class ShareAsk:
    mechanism: str
    """``kaiFractions`` or ``volcanoVgpu``."""
    what: str
    """What asks for it, as the pod says it: ``gpu-fraction=0.5``, ``volcano.sh/vgpu-number``."""


def share_asks(pod: Any) -> list[ShareAsk]:
    """The shares `pod` (as JSON) asks for: its KAI annotations, then the Volcano vGPU
    resources its containers ask for, each once."""
    asks = [ShareAsk(KAI_FRACTIONS, f"{key}={value}") for key, value in _kai_annotations(pod)]
    spec = pod.get("spec") if isinstance(pod, Mapping) else None
    names: dict[str, None] = {}
    for field in _CONTAINER_LISTS:
        containers = spec.get(field) if isinstance(spec, Mapping) else None
        for container in containers if isinstance(containers, list) else ():
            resources = container.get("resources") if isinstance(container, Mapping) else None
            for side in ("limits", "requests"):
                amounts = resources.get(side) if isinstance(resources, Mapping) else None
                if isinstance(amounts, Mapping):
                    names.update((n, None) for n in amounts if str(n).startswith(VOLCANO_PREFIX))
    return asks + [ShareAsk(VOLCANO_VGPU, str(name)) for name in names]


def shares_asked(pod: Any) -> list[str]:
    """What `pod` asks for a share with (``gpu-fraction=0.5``, ``volcano.sh/vgpu-number``)."""
    return [ask.what for ask in share_asks(pod)]


def _kai_annotations(pod: Any) -> list[tuple[str, Any]]:
    metadata = pod.get("metadata") if isinstance(pod, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return []
    return [(key, annotations[key]) for key in SHARE_ANNOTATIONS if key in annotations]
