"""The toolkit oracle's client: which devices the NVIDIA Container Toolkit reads a
container as asking for, by the toolkit's own code (tests/differential/toolkit/main.go).

A container is asked of as the runtime hands it to the toolkit: its process environment
(the image's, then the pod's, the last of a name winning, as kubelet and containerd
merge them) and its mounts (source on the node, destination in the container).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tests.differential.oracle import Json, OracleFailed, OracleProcess

GATED = ("NVIDIA_GDS", "NVIDIA_MOFED", "NVIDIA_GDRCOPY", "NVIDIA_NVSWITCH")
"""Variables the toolkit reads as a request for one more device when their value is
exactly `enabled` (internal/modifier/cdi.go, gatedDevices.DeviceRequests)."""
MIG_CAPABILITIES = ("NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES")
"""Variables it reads as a request for the MIG capabilities when their value is `all`,
of any case (migCapsDevices, strings.EqualFold)."""


@dataclass(frozen=True, slots=True)
class RuntimeContainer:
    env: tuple[str, ...]
    """``NAME=VALUE``, in the order the runtime hands them over."""
    mounts: tuple[tuple[str, str], ...] = ()
    """(source on the node, destination in the container)."""
    privileged: bool = False


@dataclass(frozen=True, slots=True)
class DeviceReading:
    visible: tuple[str, ...] = ()
    imex: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def gives_devices(self) -> bool:
        """Whether the toolkit hands the container any device: a GPU (a name other than
        the empty one `none` becomes), an IMEX channel, a gated device or the MIG
        capabilities."""
        return (
            any(name != "" for name in self.visible)
            or bool(self.imex)
            or any(self.env.get(name) == "enabled" for name in GATED)
            or any(self.env.get(name, "").lower() == "all" for name in MIG_CAPABILITIES)
        )


class ToolkitOracle(OracleProcess):
    def read(self, containers: Sequence[RuntimeContainer]) -> list[DeviceReading]:
        questions: list[Json] = [
            {
                "env": list(container.env),
                "mounts": [{"source": s, "destination": d} for s, d in container.mounts],
                "privileged": container.privileged,
                "lookup": [*GATED, *MIG_CAPABILITIES],
            }
            for container in containers
        ]
        readings = []
        for question, answer in zip(questions, self.ask(questions), strict=True):
            if "visible" not in answer:
                raise OracleFailed(f"the oracle could not answer {question!r}: {answer!r}")
            readings.append(
                DeviceReading(
                    tuple(answer["visible"] or ()),
                    tuple(answer["imex"] or ()),
                    dict(answer.get("env") or {}),
                )
            )
        return readings
