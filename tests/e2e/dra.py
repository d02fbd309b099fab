"""GPUs published through Dynamic Resource Allocation, without a driver or kubelet.

kube-scheduler allocates ResourceClaims from the ResourceSlices a DRA driver
publishes, and kube-controller-manager's resource claim controller creates a pod's
claims from its ResourceClaimTemplates; neither needs the driver to be running. So
the harness plays the driver's publishing part: ResourceSlices for a node's GPUs and
MIG devices, with the attributes NVIDIA's driver gives them (``type`` gpu or mig,
``productName``, ``architecture``, ``profile`` for a MIG device, ``memory`` as
capacity), under a driver name of the harness's own. The DeviceClasses carry the
names NVIDIA's driver installs (``gpu.nvidia.com``, ``mig.nvidia.com``) and select
this driver's devices by their ``type``, as NVIDIA's select theirs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml

from .cluster import Cluster

DRIVER = "gpu.e2e.gpu-admission.io"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
RESOURCE_API = "resource.k8s.io/v1"


@dataclass(frozen=True)
class Device:
    """One device of a node: a whole GPU, or a MIG device of ``profile``."""

    name: str
    product: str
    architecture: str
    memory: str
    profile: str | None = None

    @property
    def kind(self) -> str:
        return "gpu" if self.profile is None else "mig"

    def as_dict(self) -> dict[str, object]:
        attributes: dict[str, dict[str, str]] = {
            "type": {"string": self.kind},
            "productName": {"string": self.product},
            "architecture": {"string": self.architecture},
        }
        if self.profile is not None:
            attributes["profile"] = {"string": self.profile}
        return {
            "name": self.name,
            "attributes": attributes,
            "capacity": {"memory": {"value": self.memory}},
        }


def whole_gpus(count: int, product: str, architecture: str, memory: str) -> list[Device]:
    """``count`` whole GPUs named gpu-0, gpu-1, ..."""
    return [Device(f"gpu-{index}", product, architecture, memory) for index in range(count)]


def mig_devices(
    gpu_index: int, profile: str, count: int, product: str, architecture: str, memory: str
) -> list[Device]:
    """``count`` MIG devices of one profile on the GPU at ``gpu_index``, named like
    gpu-4-mig-1g-5gb-0 (a device name is a DNS label: no dots)."""
    label = profile.replace(".", "-")
    return [
        Device(f"gpu-{gpu_index}-mig-{label}-{slot}", product, architecture, memory, profile)
        for slot in range(count)
    ]


def device_classes() -> list[dict[str, object]]:
    """The GPU and MIG DeviceClasses, selecting this driver's devices by type."""
    return [_device_class(GPU_CLASS, "gpu"), _device_class(MIG_CLASS, "mig")]


def _device_class(name: str, kind: str) -> dict[str, object]:
    expression = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{kind}'"
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def resource_slice(node: str, devices: Sequence[Device], generation: int = 1) -> dict[str, object]:
    """The one ResourceSlice of ``node``'s pool (named after the node), as a driver
    publishes it; a changed layout is published with a higher ``generation``."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "nodeName": node,
            "driver": DRIVER,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
            "devices": [device.as_dict() for device in devices],
        },
    }


def publish(cluster: Cluster, objects: Iterable[dict[str, object]]) -> None:
    """Create or update DeviceClasses and ResourceSlices (cluster-scoped)."""
    cluster.apply("\n---\n".join(yaml.safe_dump(obj) for obj in objects))


def withdraw(cluster: Cluster, node: str) -> None:
    """Delete ``node``'s ResourceSlice, as a driver does when the node goes."""
    cluster.delete("resourceslice", [f"{node}-{DRIVER}"])
