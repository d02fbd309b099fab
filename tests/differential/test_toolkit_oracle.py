"""No device request the NVIDIA Container Toolkit honours goes unjudged.

A class pod's GPU container is joined by a sidecar without GPUs whose environment and
mounts are generated: device-request variables, their near misses and lower-case
spellings, every value the toolkit treats specially (`all`, `none`, `void`, lists, CDI
names, `enabled`), mount paths at, under and beside `/var/run/nvidia-container-devices`
(IMEX and CDI names, dots, doubled slashes, the prefix with no slash after it), of a
`/dev/null` hostPath (however spelt) or another volume, and an image that sets
`NVIDIA_VISIBLE_DEVICES=all` as CUDA's images do, or `CUDA_VERSION` alone as legacy
ones do. The pod goes through the engine as through a cluster (mutation, then validation
of the mutated pod); the sidecar, as the runtime hands it over, goes to the toolkit's own
code (tests/differential/toolkit/main.go). Whenever the toolkit would give the sidecar a
device, the engine must refuse the pod by one of the device rules.

Three times GPU_ADMISSION_DIFFERENTIAL_EXAMPLES sets the examples (900); derandomized.
With the device-mounts rule planted away, the search finds a sidecar the toolkit would
give a device to: it reaches the mount route, not the environment alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from tests.builders import container, mutated, pod, pod_create
from tests.differential.toolkit import RuntimeContainer, ToolkitOracle
from webhook.engine import Decision, Engine
from webhook.policy import load_default_policy

SEARCH = settings(
    max_examples=3 * int(os.environ.get("GPU_ADMISSION_DIFFERENTIAL_EXAMPLES", "300")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
DEVICE_RULES = frozenset({"visible-devices", "device-env", "device-mounts"})

NAMES = (
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_IMEX_CHANNELS",
    "NVIDIA_GDS",
    "NVIDIA_MOFED",
    "NVIDIA_GDRCOPY",
    "NVIDIA_NVSWITCH",
    "NVIDIA_MIG_CONFIG_DEVICES",
    "NVIDIA_MIG_MONITOR_DEVICES",
    "nvidia_visible_devices",
    "NVIDIA_VISIBLE_DEVICE",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_REQUIRE_CUDA",
    "CUDA_VERSION",
    "APP_MODE",
)
VALUES = (
    "all", "none", "void", "", "0", "0,1", " all ", "ALL", "void,0", "0,void", "none,all",
    ",", "enabled", "Enabled", "nvidia.com/gpu=0", "GPU-8f2a6c1e-0000-4000-8000-000000000000",
    "MIG-1", "0:1", "compute,utility", "cuda>=12.0", "12.4.1",
)  # fmt: skip
ROOT = "/var/run/nvidia-container-devices"
MOUNT_PATHS = (
    ROOT, f"{ROOT}/", f"{ROOT}/all", f"{ROOT}all", f"{ROOT}/0", f"{ROOT}//0//",
    f"{ROOT}/imex/0", f"{ROOT}imex/1", f"{ROOT}/imex/", f"{ROOT}/cdi/nvidia.com/gpu=0",
    f"{ROOT}/cdi/nvidia.com/gpu/1", f"{ROOT}/void", f"{ROOT}/none", f"{ROOT}-x/1",
    f"{ROOT}/../nvidia-container-devices/5", "/var/run/./nvidia-container-devices/2",
    "/var/lib/../run/nvidia-container-devices/3", "/run/nvidia-container-devices/4",
    "/var/run/nvidia-container-device/0", "/data", "/var/run/secrets/app",
)  # fmt: skip
VOLUMES: dict[str, dict[str, Any]] = {
    "null": {"hostPath": {"path": "/dev/null"}},
    "null-spelt-otherwise": {"hostPath": {"path": "//dev/./null/"}},
    "null-as-file": {"hostPath": {"path": "/dev/null", "type": "CharDevice"}},
    "zero": {"hostPath": {"path": "/dev/zero"}},
    "empty": {"emptyDir": {}},
}
IMAGE_ENV = {
    "plain": (),
    "cuda": ("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"),
    "legacy-cuda": ("CUDA_VERSION=9.0",),
}


@st.composite
def sidecars(draw: st.DrawFn) -> dict[str, Any]:
    """What the sidecar sets, which volumes it mounts where, and its image."""
    env = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=4))
    mounts = draw(
        st.lists(
            st.tuples(st.sampled_from(sorted(VOLUMES)), st.sampled_from(MOUNT_PATHS)),
            max_size=3,
            unique_by=lambda mount: mount[1],  # kube-apiserver refuses a path twice
        )
    )
    return {"env": env, "mounts": mounts, "image": draw(st.sampled_from(sorted(IMAGE_ENV)))}


def class_pod(sidecar: dict[str, Any]) -> dict[str, Any]:
    volumes, volume_mounts = [], []
    for index, (kind, path) in enumerate(sidecar["mounts"]):
        volumes.append({"name": f"v{index}", **VOLUMES[kind]})
        volume_mounts.append({"name": f"v{index}", "mountPath": path})
    side = container(
        name="sidecar",
        env=[{"name": name, "value": value} for name, value in sidecar["env"]],
        volumeMounts=volume_mounts,
    )
    return pod("inference", containers=[container(gpus=1), side], volumes=volumes)


def as_the_runtime_hands_it(admitted_pod: dict[str, Any], image: str) -> RuntimeContainer:
    """The sidecar's process environment (the image's, then the pod's) and mounts (a
    hostPath's path on the node, else the volume's folder under kubelet's)."""
    spec = admitted_pod["spec"]
    (side,) = [c for c in spec["containers"] if c["name"] == "sidecar"]
    env = [*IMAGE_ENV[image], *(f"{e['name']}={e['value']}" for e in side.get("env", []))]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = []
    for mount in side.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        source = (
            volume["hostPath"]["path"]
            if "hostPath" in volume
            else f"/var/lib/kubelet/pods/uid/volumes/kubernetes.io~empty-dir/{mount['name']}"
        )
        mounts.append((source, mount["mountPath"]))
    return RuntimeContainer(tuple(env), tuple(mounts))


Judge = Callable[[Decision], bool]


def refused_for_devices(decision: Decision) -> bool:
    return not decision.allowed and any(v.rule in DEVICE_RULES for v in decision.violations)


def unjudged_request(
    engine: Engine, toolkit: ToolkitOracle, sidecar: dict[str, Any], refused: Judge
) -> str | None:
    """Why the toolkit would give the sidecar a device the engine lets through, or None."""
    obj = class_pod(sidecar)
    admitted_pod = mutated(engine, obj)
    decision = engine.validate(pod_create(admitted_pod))
    (reading,) = toolkit.read([as_the_runtime_hands_it(admitted_pod, sidecar["image"])])
    if reading.gives_devices and not refused(decision):
        return f"the toolkit reads {reading} for {sidecar}, and the engine says {decision}"
    return None


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


@SEARCH
@given(sidecar=sidecars())
def test_every_device_request_the_toolkit_honours_is_refused(
    engine: Engine, toolkit_oracle: ToolkitOracle, sidecar: dict[str, Any]
) -> None:
    assert unjudged_request(engine, toolkit_oracle, sidecar, refused_for_devices) is None


def test_the_search_reaches_what_the_mounts_rule_alone_refuses(
    engine: Engine, toolkit_oracle: ToolkitOracle
) -> None:
    def refused_but_for_mounts(decision: Decision) -> bool:
        rules = {v.rule for v in decision.violations} - {"device-mounts"}
        return not decision.allowed and bool(rules & DEVICE_RULES)

    found = find(
        sidecars(),
        lambda sidecar: (
            unjudged_request(engine, toolkit_oracle, sidecar, refused_but_for_mounts) is not None
        ),
        settings=settings(SEARCH, max_examples=2000),
    )

    assert found["mounts"]


def test_the_toolkit_reads_the_prefix_as_a_string_and_void_as_nothing(
    toolkit_oracle: ToolkitOracle,
) -> None:
    """The toolkit's own answers for the cases the rules were written from."""
    every, channel, void, unprivileged_none = toolkit_oracle.read(
        [
            RuntimeContainer((), (("/dev/null", f"{ROOT}all"),)),
            RuntimeContainer((), (("/dev/null", f"{ROOT}imex/0"),)),
            RuntimeContainer(("NVIDIA_VISIBLE_DEVICES=void",), (("/dev/null", f"{ROOT}/void"),)),
            RuntimeContainer(("NVIDIA_VISIBLE_DEVICES=none",)),
        ]
    )

    assert every.visible == ("all",)
    assert channel.imex == ("0",)
    assert not void.gives_devices
    assert not unprivileged_none.gives_devices
