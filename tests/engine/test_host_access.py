"""Rule host-access (webhook/engine/rules/host_access.py): what of the node a pod that can
reach a GPU node may use is what the policy's hostAccess allows, nothing by default."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import admitted, container, pod, pod_create
from webhook.engine import Decision, Engine
from webhook.errors import PolicyError
from webhook.policy import load_policy_text
from webhook.policy.load import default_policy_text

TRAINING_CLASS = "    priorityClass: {name: training-priority, value: 1000}\n"


def engine_with(top_level: str = "", training: str = "") -> Engine:
    """The default policy with `top_level` YAML appended and `training` added to the
    training class (indented as its fields are)."""
    text = default_policy_text()
    assert TRAINING_CLASS in text
    text = text.replace(TRAINING_CLASS, TRAINING_CLASS + training)
    return Engine(load_policy_text(text + "\n" + top_level, "custom.yaml"))


@pytest.fixture(scope="module")
def engine() -> Engine:
    return engine_with()


def rules(decision: Decision) -> list[str]:
    return [v.rule for v in decision.violations]


def mounting(
    workload: str | None, path: str, read_only: bool | None = None, **spec: Any
) -> dict[str, Any]:
    mount: dict[str, Any] = {"name": "host", "mountPath": "/host"}
    if read_only is not None:
        mount["readOnly"] = read_only
    return pod(
        workload,
        containers=[container(volumeMounts=[mount])],
        volumes=[{"name": "host", "hostPath": {"path": path}}],
        **spec,
    )


class TestTheNodesNamespaces:
    @pytest.mark.parametrize("field", ["hostNetwork", "hostPID", "hostIPC"])
    def test_a_class_pod_sharing_one_of_the_nodes_namespaces_is_refused_saying_how_to_allow_it(
        self, engine: Engine, field: str
    ) -> None:
        decision = admitted(engine, pod("training", **{field: True}))

        assert rules(decision) == ["host-access"]
        assert f"pod sets {field}: true" in decision.message
        assert f"set {field}: true in hostAccess" in decision.message

    def test_a_pod_of_no_class_that_may_reach_a_gpu_node_is_refused_too(
        self, engine: Engine
    ) -> None:
        """It tolerates every taint: the scheduler may put it on a GPU node."""
        obj = pod(hostPID=True, tolerations=[{"operator": "Exists"}])

        assert "host-access" in rules(admitted(engine, obj))

    def test_a_pod_kept_off_gpu_nodes_may_share_them(self, engine: Engine) -> None:
        """On a node without GPUs there is nothing of theirs to reach."""
        assert admitted(engine, pod(hostNetwork=True, hostPID=True)).allowed

    def test_the_class_that_allows_the_nodes_network_has_it_and_no_other_class(self) -> None:
        engine = engine_with(training="    hostAccess: {hostNetwork: true}\n")

        assert admitted(engine, pod("training", hostNetwork=True)).allowed
        assert rules(admitted(engine, pod("inference", hostNetwork=True))) == ["host-access"]
        assert rules(admitted(engine, pod("training", hostPID=True))) == ["host-access"]

    def test_the_policys_own_allowance_is_every_classs(self) -> None:
        engine = engine_with("hostAccess: {hostIPC: true}\n")

        assert admitted(engine, pod("training", hostIPC=True)).allowed
        assert admitted(engine, pod("inference", hostIPC=True)).allowed


class TestHostPaths:
    @pytest.mark.parametrize(
        "path",
        [
            "/sys/bus/pci",  # the GPUs' PCI functions: reset, rebind, read their config
            "/usr/local/nvidia",  # the toolkit's binaries the runtime runs as root
            "/run/dbus",  # the system bus's socket
            "/var/lib/kubelet/pki",  # the kubelet's credentials
            "/var/log",
        ],
    )
    def test_a_folder_the_policy_does_not_allow_is_refused_naming_the_allowance(
        self, engine: Engine, path: str
    ) -> None:
        decision = admitted(engine, mounting("inference", path, read_only=True))

        assert rules(decision) == ["host-access"]
        assert f"mounts '{path}' of the node" in decision.message
        assert "folders allowed: none" in decision.message

    def test_an_allowed_folder_and_what_is_inside_it_pass_read_only(self) -> None:
        engine = engine_with("hostAccess:\n  paths: [{path: /data/models}]\n")

        for path in ("/data/models", "/data/models/llama", "/data/models/./llama/"):
            assert admitted(engine, mounting("inference", path, read_only=True)).allowed, path

    @pytest.mark.parametrize("path", ["/data/modelsx", "/data", "/data/models/../../srv"])
    def test_a_path_beside_above_or_escaping_an_allowed_folder_is_refused(self, path: str) -> None:
        engine = engine_with("hostAccess:\n  paths: [{path: /data/models}]\n")

        assert rules(admitted(engine, mounting("inference", path, read_only=True))) == [
            "host-access"
        ]

    @pytest.mark.parametrize("read_only", [None, False])
    def test_a_read_only_folder_mounted_writable_is_refused_with_the_fix(
        self, read_only: bool | None
    ) -> None:
        engine = engine_with("hostAccess:\n  paths: [{path: /data/models}]\n")

        decision = admitted(engine, mounting("inference", "/data/models", read_only=read_only))

        assert rules(decision) == ["host-access"]
        assert "writable (spec.containers[0].volumeMounts[0])" in decision.message
        assert "set readOnly: true" in decision.message

    def test_a_folder_allowed_writable_may_be_written(self) -> None:
        engine = engine_with("hostAccess:\n  paths: [{path: /scratch, readOnly: false}]\n")

        assert admitted(engine, mounting("training", "/scratch/job")).allowed

    def test_kai_mps_pipes_allowed_to_a_class_lift_device_mounts_for_it_alone(self) -> None:
        """KAI's MPS example mounts the node's /tmp/nvidia-mps writable; device-mounts
        refuses it unless the class's allowance names it."""
        engine = engine_with(
            training="    hostAccess:\n      paths: [{path: /tmp/nvidia-mps, readOnly: false}]\n"
        )

        assert admitted(engine, mounting("training", "/tmp/nvidia-mps")).allowed
        assert rules(admitted(engine, mounting("inference", "/tmp/nvidia-mps"))) == [
            "device-mounts"
        ]

    def test_what_device_mounts_refuses_is_not_named_twice(self, engine: Engine) -> None:
        decision = admitted(engine, mounting("inference", "/run/containerd", read_only=True))

        assert rules(decision) == ["device-mounts"]

    def test_a_pod_kept_off_gpu_nodes_may_mount_the_nodes_folders(self, engine: Engine) -> None:
        assert admitted(engine, mounting(None, "/var/log", read_only=True)).allowed


class TestThePolicysAllowance:
    @pytest.mark.parametrize(
        ("folder", "held"),
        [("/run", "/run/nvidia"), ("/dev", "/dev/dri"), ("/var/lib/kubelet", "device-plugins")],
    )
    def test_a_folder_holding_the_runtimes_sockets_or_the_gpus_is_refused(
        self, folder: str, held: str
    ) -> None:
        with pytest.raises(PolicyError, match=f"hostAccess.paths: '{folder}' holds .*{held}"):
            engine_with(f"hostAccess:\n  paths: [{{path: {folder}}}]\n")

    def test_a_class_allowing_one_is_refused_at_its_own_field(self) -> None:
        with pytest.raises(PolicyError, match=r"classes\.training\.hostAccess\.paths: '/dev'"):
            engine_with(training="    hostAccess:\n      paths: [{path: /dev}]\n")

    @pytest.mark.parametrize(
        ("path", "reason"),
        [
            ("/", "'/' is every folder of the node"),
            ("data", "'data' is not an absolute path of the node"),
            ("/data/../etc", "not a clean absolute path; write '/etc'"),
            ("/data/", "not a clean absolute path; write '/data'"),
        ],
    )
    def test_a_path_that_is_not_one_clean_folder_is_refused(self, path: str, reason: str) -> None:
        with pytest.raises(PolicyError, match=reason):
            engine_with(f"hostAccess:\n  paths: [{{path: '{path}'}}]\n")


class TestDebugContainers:
    def debug(self, engine: Engine, old: dict[str, Any], new: dict[str, Any]) -> Decision:
        request = pod_create(
            new, operation="UPDATE", subresource="ephemeralcontainers", old_object=old
        )
        mutation = engine.mutate(request)
        patched = jsonpatch.apply_patch(new, list(mutation.patch))
        request = pod_create(
            patched, operation="UPDATE", subresource="ephemeralcontainers", old_object=old
        )
        return engine.validate(request)

    def test_a_debug_container_may_not_write_a_folder_allowed_read_only(self) -> None:
        engine = engine_with("hostAccess:\n  paths: [{path: /data/models}]\n")
        old = mounting("inference", "/data/models", read_only=True)
        new = mounting("inference", "/data/models", read_only=True)
        new["spec"]["ephemeralContainers"] = [
            {"name": "d", "image": "i", "volumeMounts": [{"name": "host", "mountPath": "/m"}]}
        ]

        decision = self.debug(engine, old, new)

        assert rules(decision) == ["host-access"]
        assert "ephemeral container" in decision.message and "writable" in decision.message
