"""What the runtime honours besides resources: CDI annotations, device mounts, privilege."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import admitted, container, match_expression, pod
from webhook.engine import Decision, Engine
from webhook.policy import load_default_policy, load_policy_text


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def rules(decision: Decision) -> list[str]:
    return [v.rule for v in decision.violations]


def annotated(workload: str | None, **annotations: str) -> dict[str, Any]:
    obj = pod(workload)
    obj["metadata"]["annotations"] = annotations
    return obj


def with_host_path(path: str, mount_path: str = "/data") -> dict[str, Any]:
    mount = {"name": "host", "mountPath": mount_path}
    return pod(
        "training",
        containers=[container(volumeMounts=[mount])],
        volumes=[{"name": "host", "hostPath": {"path": path}}],
    )


def with_empty_dir_at(mount_path: str) -> dict[str, Any]:
    """A training pod mounting an emptyDir at `mount_path`."""
    return pod(
        "training",
        containers=[container(volumeMounts=[{"name": "v", "mountPath": mount_path}])],
        volumes=[{"name": "v", "emptyDir": {}}],
    )


TOLERATING_GPU_POOLS = {"tolerations": [{"key": "gpu-pool", "operator": "Exists"}]}


class TestCdiAnnotations:
    @pytest.mark.parametrize(
        "key",
        [
            "cdi.k8s.io/gpu",
            "nvidia.cdi.k8s.io/pod",
            "nvidia.cdi.k8s.io/container.app",
            "nvidia.cdi.k8s.io",
        ],
    )
    def test_an_annotation_asking_for_cdi_devices_is_refused(
        self, engine: Engine, key: str
    ) -> None:
        decision = admitted(engine, annotated("inference", **{key: "nvidia.com/gpu=all"}))
        assert rules(decision) == ["device-annotations"]
        assert "asks the container runtime for CDI devices" in decision.message

    def test_other_annotations_pass(self, engine: Engine) -> None:
        assert admitted(engine, annotated("inference", **{"example.com/cdi": "x"})).allowed

    def test_a_cpu_pod_that_cannot_reach_a_gpu_node_may_carry_one(self, engine: Engine) -> None:
        assert admitted(engine, annotated(None, **{"cdi.k8s.io/x": "vendor.com/dev=a"})).allowed


class TestDeviceMounts:
    @pytest.mark.parametrize(
        "path",
        [
            "/dev/nvidia0",
            "/dev/nvidiactl",
            "/dev/dri",
            "/dev",
            "/",
            "/etc/cdi",
            "/var/run/cdi",
            "/run/nvidia/mps",
            "/var/lib/../../dev/nvidia-uvm",
        ],
    )
    def test_a_host_path_of_the_gpus_devices_or_holding_them_is_refused(
        self, engine: Engine, path: str
    ) -> None:
        decision = admitted(engine, with_host_path(path))
        assert rules(decision) == ["device-mounts"]

    @pytest.mark.parametrize("path", ["/var/lib/models", "/dev/shm", "/data"])
    def test_other_host_paths_are_no_device_mount_but_need_the_policys_allowance(
        self, engine: Engine, path: str
    ) -> None:
        """host-access refuses them unless the policy allows the folder (test_host_access)."""
        assert rules(admitted(engine, with_host_path(path))) == ["host-access"]

    @pytest.mark.parametrize(
        "mount_path",
        [
            "/var/run/nvidia-container-devices/all",
            "/run/nvidia-container-devices/GPU-1",
            "/var/run/nvidia-container-devices",
            # The toolkit matches the cleaned path's string, not its folder.
            "/var/run/nvidia-container-devicesall",
            "/var/run/nvidia-container-devicesimex/0",
            "/var/run/nvidia-container-devices-x/1",
            "//var/run/./nvidia-container-devices/../nvidia-container-devices/5/",
        ],
    )
    def test_a_mount_read_as_a_device_request_is_refused_whatever_the_volume(
        self, engine: Engine, mount_path: str
    ) -> None:
        decision = admitted(engine, with_empty_dir_at(mount_path))
        assert rules(decision) == ["device-mounts"]
        assert "volume-mounts strategy" in decision.message

    @pytest.mark.parametrize(
        "mount_path",
        [
            "/var/run/nvidia-container-device",
            "/var/run/nvidia-container",
            "/data/nvidia-container-devices",
        ],
    )
    def test_a_mount_path_the_toolkit_does_not_read_passes(
        self, engine: Engine, mount_path: str
    ) -> None:
        assert admitted(engine, with_empty_dir_at(mount_path)).allowed

    def test_a_gpu_less_sidecar_of_a_class_pod_may_not_mount_every_gpu_by_prefix(
        self, engine: Engine
    ) -> None:
        sidecar = container(
            name="sidecar",
            resources={},
            volumeMounts=[{"name": "null", "mountPath": "/var/run/nvidia-container-devicesall"}],
        )
        obj = pod(
            "inference",
            containers=[container(), sidecar],
            volumes=[{"name": "null", "hostPath": {"path": "/dev/null"}}],
        )
        decision = admitted(engine, obj)
        assert rules(decision) == ["device-mounts", "host-access"]
        assert "'/var/run/nvidia-container-devicesall'" in decision.message


class TestHostSocketsOfTheGpuStack:
    @pytest.mark.parametrize(
        "path",
        [
            "/run/containerd/containerd.sock",
            "/var/run/containerd",
            "/var/run/crio/crio.sock",
            "/var/run/docker.sock",
            "/var/lib/kubelet/device-plugins",
            "/var/lib/kubelet/device-plugins/kubelet.sock",
            "/var/lib/kubelet/pod-resources/kubelet.sock",
            "/var/lib/kubelet/plugins/gpu.nvidia.com",
            "/var/run/nvidia-persistenced/socket",
            "/tmp/nvidia-mps",
            "/var/lib/kubelet",
            "/var/lib/./kubelet//device-plugins/",
        ],
    )
    def test_a_host_path_of_a_runtime_kubelet_or_nvidia_socket_is_refused(
        self, engine: Engine, path: str
    ) -> None:
        decision = admitted(engine, with_host_path(path))
        assert rules(decision) == ["device-mounts"]
        assert "container runtime, kubelet device plugins or NVIDIA stack" in decision.message

    def test_it_is_refused_even_for_a_pod_that_cannot_reach_a_gpu_node(
        self, engine: Engine
    ) -> None:
        mount = {"name": "host", "mountPath": "/run/containerd"}
        obj = pod(
            containers=[container(volumeMounts=[mount])],
            volumes=[{"name": "host", "hostPath": {"path": "/run/containerd"}}],
        )
        assert rules(admitted(engine, obj)) == ["device-mounts"]

    @pytest.mark.parametrize(
        "path", ["/var/lib/kubelet-data", "/var/lib/models", "/tmp/scratch", "/run/user"]
    )
    def test_neighbouring_host_paths_are_left_to_host_access(
        self, engine: Engine, path: str
    ) -> None:
        assert rules(admitted(engine, with_host_path(path))) == ["host-access"]


class TestPrivilegedContainers:
    @pytest.mark.parametrize(
        "security",
        [
            {"privileged": True},
            {"capabilities": {"add": ["SYS_ADMIN"]}},
            {"capabilities": {"add": ["cap_sys_admin"]}},
            {"capabilities": {"add": ["ALL"]}},
        ],
    )
    def test_a_privileged_container_of_a_class_pod_is_refused(
        self, engine: Engine, security: dict[str, Any]
    ) -> None:
        obj = pod("training", containers=[container(securityContext=security)])
        assert rules(admitted(engine, obj)) == ["privileged-containers"]

    def test_other_capabilities_pass(self, engine: Engine) -> None:
        security = {"capabilities": {"add": ["NET_ADMIN"]}, "privileged": False}
        assert admitted(
            engine, pod("training", containers=[container(securityContext=security)])
        ).allowed

    def test_a_privileged_cpu_pod_kept_off_gpu_nodes_passes(self, engine: Engine) -> None:
        obj = pod(containers=[container(securityContext={"privileged": True})])
        assert admitted(engine, obj).allowed

    def test_a_privileged_cpu_pod_that_can_reach_a_gpu_node_is_refused_for_both(
        self, engine: Engine
    ) -> None:
        obj = pod(
            containers=[container(securityContext={"privileged": True})], **TOLERATING_GPU_POOLS
        )
        assert rules(admitted(engine, obj)) == ["privileged-containers", "non-gpu-placement"]

    def test_an_exempt_pod_is_not_judged(self) -> None:
        policy = load_default_policy()
        text = "exemptions:\n  - namespaces: [ml]\n    reason: platform's own\n"
        exempting = Engine(load_policy_text(_default_text() + text, "exempting.yaml"))
        obj = pod("training", containers=[container(securityContext={"privileged": True})])
        assert admitted(exempting, obj).allowed
        assert policy.exemptions == ()

    def test_the_rule_can_be_rolled_out_as_a_warning(self) -> None:
        text = "enforcement:\n  rules: {privileged-containers: warn}\n"
        warning = Engine(load_policy_text(_default_text() + text, "warn.yaml"))
        obj = pod("training", containers=[container(securityContext={"privileged": True})])
        decision = admitted(warning, obj)
        assert decision.allowed
        assert any("privileged-containers" in w for w in decision.warnings)


def _default_text() -> str:
    return (Path(__file__).parents[2] / "policies" / "default.yaml").read_text("utf-8")


def test_the_node_affinity_of_a_pod_of_no_class_decides_whether_it_is_judged(
    engine: Engine,
) -> None:
    off_gpu_nodes = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [match_expression("gpu-pool", "DoesNotExist")]}
                ]
            }
        }
    }
    obj = annotated(None, **{"cdi.k8s.io/x": "nvidia.com/gpu=all"})
    obj["spec"].update(TOLERATING_GPU_POOLS, affinity=off_gpu_nodes)
    assert admitted(engine, obj).allowed
