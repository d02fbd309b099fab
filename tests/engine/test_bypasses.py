"""Ways around the policy a tenant who can create pods in one namespace would try.

Each was a way to reach a GPU node, see its GPUs or borrow a priority without
being refused; each is refused (or, for debug containers, isolated) now.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import jsonpatch
import pytest

from tests.builders import GPU_MODEL, admitted, container, pod, pod_create
from webhook.engine import Decision, Engine
from webhook.engine.inventory import Inventory, NodeFacts
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.compiled import Taint

TOLERATE_TRAINING = {"key": "gpu-pool", "operator": "Exists"}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def node(name: str, labels: dict[str, str], **allocatable: int) -> NodeFacts:
    """A node as clusters following the practice have it: a GPU pool's tainted with its pool."""
    resources = {f"nvidia.com/{k.replace('_', '.')}": Decimal(v) for k, v in allocatable.items()}
    pool = labels.get("gpu-pool")
    taints = (Taint("gpu-pool", pool, "NoSchedule"),) if pool else ()
    return NodeFacts(name, labels, True, resources, taints)


INFERENCE_A100 = {"gpu-pool": "inference", "nvidia-gpu-model": "A100"}
NODES = Inventory(
    nodes=(
        node("inference-0", INFERENCE_A100, gpu=8),
        node("training-0", {"gpu-pool": "training", "nvidia-gpu-model": "V100"}, gpu=8),
        node("cpu-0", {}),
        node("gpu-new", {"gpu-pool": "experimental"}, gpu=8),
    )
)


def rules(decision: Decision) -> list[str]:
    return [v.rule for v in decision.violations]


class TestNodeNameSetByHand:
    def test_a_cpu_pod_bound_to_a_gpu_node_is_refused_naming_the_node_and_pool(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, pod(nodeName="training-0"), NODES)

        assert not decision.allowed
        assert rules(decision) == ["non-gpu-placement"]
        assert "names node 'training-0' in spec.nodeName" in decision.message
        assert "GPU pool training (gpu-pool=training)" in decision.message

    @pytest.mark.parametrize("workload", [None, "inference"])
    def test_a_pod_bound_to_a_gpu_node_outside_every_pool_is_refused(
        self, engine: Engine, workload: str | None
    ) -> None:
        decision = admitted(engine, pod(workload, nodeName="gpu-new"), NODES)

        assert not decision.allowed
        assert "the node offers GPUs but is in no pool of the policy" in decision.message

    def test_a_cpu_pod_bound_to_a_cpu_node_is_admitted(self, engine: Engine) -> None:
        assert admitted(engine, pod(nodeName="cpu-0"), NODES).allowed

    def test_a_class_pod_bound_to_a_node_of_another_pool_is_refused(self, engine: Engine) -> None:
        decision = admitted(engine, pod("inference", nodeName="training-0"), NODES)

        assert rules(decision) == ["pool-placement"]
        assert "the node is in pool training (gpu-pool=training)" in decision.message

    def test_a_class_pod_bound_to_a_node_of_its_pool_is_admitted(self, engine: Engine) -> None:
        assert admitted(engine, pod("inference", nodeName="inference-0"), NODES).allowed

    def test_a_pinned_model_bound_to_a_node_of_another_model_is_refused(
        self, engine: Engine
    ) -> None:
        obj = pod("training", labels={GPU_MODEL: "A100"}, nodeName="training-0")

        assert rules(admitted(engine, obj, NODES)) == ["gpu-model"]

    @pytest.mark.parametrize(
        ("inventory", "reason"),
        [(Inventory(), "no live inventory"), (NODES, "no such node exists")],
        ids=["no-inventory", "unknown-node"],
    )
    def test_a_node_the_service_cannot_place_is_refused_with_the_reason(
        self, engine: Engine, inventory: Inventory, reason: str
    ) -> None:
        decision = admitted(engine, pod(nodeName="gpu-node-7"), inventory)

        assert not decision.allowed
        assert reason in decision.message

    def test_a_node_the_service_cannot_place_is_an_error_not_the_pods_fault(
        self, engine: Engine
    ) -> None:
        assert admitted(engine, pod(nodeName="gpu-node-7"), Inventory()).outcome == "error"

    def test_a_pod_bound_to_a_node_of_another_pool_is_denied_not_an_error(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, pod("inference", nodeName="training-0"), NODES)

        assert decision.outcome == "denied"

    def test_a_fault_of_the_pods_own_beside_what_cannot_be_judged_is_a_denial(
        self, engine: Engine
    ) -> None:
        obj = pod(nodeName="gpu-node-7", priorityClassName="training-priority")

        assert admitted(engine, obj, Inventory()).outcome == "denied"


class TestPodUpdate:
    def update(
        self, engine: Engine, old: dict[str, Any], new: dict[str, Any], inventory: Inventory = NODES
    ) -> Decision:
        return engine.validate(pod_create(new, operation="UPDATE", old_object=old), inventory)

    def test_adding_a_toleration_for_a_gpu_pool_to_a_cpu_pod_is_refused(
        self, engine: Engine
    ) -> None:
        old = pod(nodeSelector={"gpu-pool": "training"})
        new = pod(nodeSelector={"gpu-pool": "training"}, tolerations=[TOLERATE_TRAINING])

        decision = self.update(engine, old, new)

        assert rules(decision) == ["non-gpu-placement"]
        assert decision.message.startswith("gpu-admission denied update of pod 'ml/p'")

    def test_an_update_that_breaks_nothing_new_is_admitted(self, engine: Engine) -> None:
        """A pod admitted before its namespace opted in keeps what it had: its priority
        and the rest are immutable, so refusing them now would only block the update."""
        old = pod("training", containers=[container(gpus=1)])
        new = pod("training", containers=[container(gpus=1)], activeDeadlineSeconds=60)

        assert self.update(engine, old, new).allowed

    def test_an_update_judges_the_pod_as_it_will_be(self, engine: Engine) -> None:
        old = pod("inference", containers=[container(gpus=1)])
        new = pod("inference", containers=[container(gpus=1)], tolerations=[TOLERATE_TRAINING])

        assert "pool-placement" in rules(self.update(engine, old, new))

    def test_a_status_update_is_not_judged(self, engine: Engine) -> None:
        new = pod(tolerations=[TOLERATE_TRAINING])
        request = pod_create(new, operation="UPDATE", subresource="status", old_object=pod())

        assert engine.validate(request, NODES).allowed

    def test_updates_are_never_mutated(self, engine: Engine) -> None:
        request = pod_create(pod("inference"), operation="UPDATE", old_object=pod("inference"))

        assert engine.mutate(request) == Decision(allowed=True)


class TestEphemeralContainers:
    def debug(
        self, engine: Engine, old: dict[str, Any], new: dict[str, Any]
    ) -> tuple[Decision, Decision]:
        request = pod_create(
            new, operation="UPDATE", subresource="ephemeralcontainers", old_object=old
        )
        mutation = engine.mutate(request)
        assert mutation.allowed, mutation.message
        patched = jsonpatch.apply_patch(new, list(mutation.patch))
        request = pod_create(
            patched, operation="UPDATE", subresource="ephemeralcontainers", old_object=old
        )
        return mutation, engine.validate(request)

    def test_a_debug_container_is_isolated_from_the_nodes_gpus(self, engine: Engine) -> None:
        old = pod("inference", containers=[container(gpus=1)])
        new = pod(
            "inference",
            containers=[container(gpus=1)],
            ephemeralContainers=[{"name": "debugger", "image": "nvidia/cuda:12"}],
        )

        mutation, validation = self.debug(engine, old, new)

        assert list(mutation.patch) == [
            {
                "op": "add",
                "path": "/spec/ephemeralContainers/0/env",
                "value": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
            }
        ]
        assert validation.allowed

    def test_debug_containers_already_there_are_left_as_they_are(self, engine: Engine) -> None:
        """kube-apiserver refuses any change to an existing ephemeral container."""
        earlier = {"name": "earlier", "image": "busybox"}
        old = pod("inference", ephemeralContainers=[earlier])
        new = pod(
            "inference",
            ephemeralContainers=[earlier, {"name": "later", "image": "busybox", "env": []}],
        )

        mutation, _ = self.debug(engine, old, new)

        assert [op["path"] for op in mutation.patch] == ["/spec/ephemeralContainers/1/env/-"]

    def test_a_debug_container_asking_for_all_gpus_is_refused(self, engine: Engine) -> None:
        env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        new = pod("inference", ephemeralContainers=[{"name": "d", "image": "i", "env": env}])

        mutation, validation = self.debug(engine, pod("inference"), new)

        assert list(mutation.patch) == []
        assert rules(validation) == ["visible-devices"]

    @pytest.mark.parametrize(
        "mount_path",
        ["/var/run/nvidia-container-devices/all", "/var/run/nvidia-container-devicesall"],
    )
    def test_a_debug_container_mounting_a_volume_as_a_device_request_is_refused(
        self, engine: Engine, mount_path: str
    ) -> None:
        """The volume was admitted with the pod, mounted by none of its containers; the
        debug container's mount is read before the injected variable."""
        volumes = [{"name": "null", "hostPath": {"path": "/dev/null"}}]
        mounts = [{"name": "null", "mountPath": mount_path}]
        old = pod("inference", volumes=volumes)
        new = pod(
            "inference",
            volumes=volumes,
            ephemeralContainers=[{"name": "d", "image": "i", "volumeMounts": mounts}],
        )

        _, validation = self.debug(engine, old, new)

        # /dev/null is no folder the policy allows either (host-access)
        assert rules(validation) == ["device-mounts", "host-access"]
        assert "ephemeral container" in validation.message

    def test_a_debug_container_mounting_a_volume_of_the_nodes_devices_is_refused(
        self, engine: Engine
    ) -> None:
        """A pod admitted before its namespace opted in may hold such a volume already."""
        volumes = [{"name": "dev", "hostPath": {"path": "/dev"}}]
        mounts = [{"name": "dev", "mountPath": "/host-dev"}]
        new = pod(
            "inference",
            volumes=volumes,
            ephemeralContainers=[{"name": "d", "image": "i", "volumeMounts": mounts}],
        )

        _, validation = self.debug(engine, pod("inference", volumes=volumes), new)

        assert rules(validation) == ["device-mounts"]
        assert "hostPath volume 'dev' of the node's '/dev'" in validation.message

    def test_a_debug_container_mounting_an_ordinary_volume_passes(self, engine: Engine) -> None:
        volumes = [{"name": "data", "emptyDir": {}}]
        mounts = [{"name": "data", "mountPath": "/data"}]
        new = pod(
            "inference",
            volumes=volumes,
            ephemeralContainers=[{"name": "d", "image": "i", "volumeMounts": mounts}],
        )

        _, validation = self.debug(engine, pod("inference", volumes=volumes), new)

        assert validation.allowed, validation.message


class TestBorrowedPriority:
    def test_a_pod_of_no_class_using_a_class_priority_is_refused(self, engine: Engine) -> None:
        decision = admitted(engine, pod(priorityClassName="inference-priority"))

        assert rules(decision) == ["priority-class"]
        assert "reserves for inference pods" in decision.message

    def test_a_pod_of_no_class_may_use_a_priority_the_policy_does_not_govern(
        self, engine: Engine
    ) -> None:
        assert admitted(engine, pod(priorityClassName="system-cluster-critical")).allowed


class TestClassPodsWithoutGpus:
    def test_a_class_pod_asking_for_zero_gpus_is_refused(self, engine: Engine) -> None:
        obj = pod("inference", containers=[container(gpus=0, requests={"cpu": "60"})])

        decision = admitted(engine, obj)

        assert rules(decision) == ["gpu-count"]
        assert "inference pod requests no GPU" in decision.message

    def test_a_class_pod_asking_for_nothing_gets_the_default_gpu(self, engine: Engine) -> None:
        assert admitted(engine, pod("inference")).allowed


SHARED = {"nvidia.com/gpu.shared": "2"}


class TestOtherGpuResources:
    def test_a_shared_gpu_makes_a_pod_a_gpu_pod(self, engine: Engine) -> None:
        decision = admitted(engine, pod(containers=[container(limits=SHARED)]))

        assert rules(decision) == ["workload-class"]
        assert "requests nvidia.com/gpu.shared" in decision.message

    def test_a_class_pod_on_shared_gpus_is_admitted_without_a_default_gpu(
        self, engine: Engine
    ) -> None:
        obj = pod("inference", containers=[container(limits=SHARED, requests=SHARED)])

        assert admitted(engine, obj).allowed

    def test_a_container_on_shared_gpus_is_not_blinded(self, engine: Engine) -> None:
        obj = pod("inference", containers=[container(limits=SHARED)])
        decision = engine.mutate(pod_create(obj))

        assert not any("NVIDIA_VISIBLE_DEVICES" in str(op) for op in decision.patch)

    def test_shared_gpus_are_judged_against_what_nodes_advertise_now(self, engine: Engine) -> None:
        inventory = Inventory(nodes=(node("inference-0", INFERENCE_A100, gpu_shared=4),))
        big = {"nvidia.com/gpu.shared": "6"}
        obj = pod("inference", containers=[container(limits=big, requests=big)])

        decision = admitted(engine, obj, inventory)

        assert rules(decision) == ["gpu-count"]
        assert "has 4 allocatable now (node inference-0)" in decision.message

    def test_the_names_are_a_policy_setting(self) -> None:
        text = (
            "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"
            "resources: {otherGpus: [amd.com/gpu]}\n"
            "pools: {p: {gpusPerNode: 8, models: {M: {}}}}\n"
            "classes: {c: {pools: [p], priorityClass: {name: c-priority, value: 10}}}\n"
        )
        engine = Engine(load_policy_text(text, "custom.yaml"))
        amd = pod(containers=[container(limits={"amd.com/gpu": "1"})])
        shared = pod(containers=[container(limits=SHARED)])

        assert rules(admitted(engine, amd)) == ["workload-class"]
        assert admitted(engine, shared).allowed
