"""Validation rules (webhook/engine/rules/*), judged on pods as they reach /validate.

Most cases go through `admitted`: our mutation first, then validation of the
mutated pod, which is what kube-apiserver does. Cases about pods our mutation
never touched (no label, unknown class) validate the pod as written.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders import GPU_MODEL, admitted, container, pod, pod_create
from webhook.engine import Decision, Engine
from webhook.policy import load_default_policy
from webhook.policy.load import default_policy_text, load_policy_text

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def validated(engine: Engine, obj: dict[str, Any], **overrides: Any) -> Decision:
    return engine.validate(pod_create(obj, **overrides))


def rules(decision: Decision) -> list[str]:
    return [v.rule for v in decision.violations]


def requiring(*expressions: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}
    }


class TestAcceptedPods:
    @pytest.mark.parametrize(
        "obj",
        [
            pod("inference"),
            pod("inference", containers=[container(limits={"nvidia.com/gpu": "8"})]),
            pod("training", containers=[container(gpus=8)], labels={GPU_MODEL: "V100"}),
            pod("inference", containers=[container(limits={"nvidia.com/mig-1g.5gb": "56"})]),
            pod("inference", containers=[container(limits={"nvidia.com/mig-3g.20gb": "2"})]),
            pod("inference", containers=[container(limits={"nvidia.com/mig-1g.5gb.me": "1"})]),
            pod(containers=[container()]),
            pod(containers=[container()], tolerations=[{"operator": "Exists"}],
                affinity=requiring({"key": "gpu-pool", "operator": "DoesNotExist"})),
        ],
        ids=[
            "inference-default", "inference-8", "training-v100-8", "mig-56-slices",
            "mig-3g", "mig-me", "cpu-pod", "cpu-pod-tolerating-all-but-off-gpu-pools",
        ],
    )  # fmt: skip
    def test_pods_that_follow_the_practice_are_admitted(
        self, engine: Engine, obj: dict[str, Any]
    ) -> None:
        decision = admitted(engine, obj)
        assert decision.allowed, decision.message


class TestWrongPool:
    def test_an_inference_pod_selecting_the_training_pool_can_never_reach_its_own(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, pod("inference", nodeSelector={"gpu-pool": "training"}))
        assert rules(decision) == ["pool-placement"]
        assert decision.message.endswith(
            "inference pod can never be scheduled on its pool inference (nodes labelled "
            "gpu-pool=inference, nvidia-gpu-model=A100): spec.nodeSelector.gpu-pool: training "
            "does not match gpu-pool=inference; remove or correct it"
        )

    def test_an_affinity_requirement_for_a_model_the_pool_lacks_is_named_by_its_path(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "inference",
            affinity=requiring({"key": "nvidia-gpu-model", "operator": "In", "values": ["V100"]}),
        )
        decision = admitted(engine, obj)
        assert rules(decision) == ["pool-placement"]
        assert (
            "its pool inference (nodes labelled gpu-pool=inference, nvidia-gpu-model=A100): "
            f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0] "
            "(nvidia-gpu-model In [V100]) does not match nvidia-gpu-model=A100; "
            "remove or correct it"
        ) in decision.message

    def test_each_of_several_terms_is_named_with_why_it_fails(self, engine: Engine) -> None:
        terms = [
            {
                "matchExpressions": [
                    {"key": "nvidia-gpu-model", "operator": "In", "values": ["H100"]}
                ]
            },
            {"matchExpressions": [{"key": "gpu-pool", "operator": "DoesNotExist"}]},
        ]
        obj = pod("training", affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}})
        decision = admitted(engine, obj)
        assert rules(decision) == ["pool-placement"]
        path = f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms"
        assert (
            "its pool training (nodes labelled gpu-pool=training, nvidia-gpu-model=V100 or A100): "
            f"no required node affinity term matches them: {path}[0].matchExpressions[0] "
            "(nvidia-gpu-model In [H100]) does not match nvidia-gpu-model=V100 or A100, and "
            f"{path}[1].matchExpressions[0] (gpu-pool DoesNotExist) does not match "
            "gpu-pool=training; remove or correct them"
        ) in decision.message

    def test_a_thousand_failing_terms_make_a_short_denial(self, engine: Engine) -> None:
        term = {
            "matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": ["x" * 10_000]}]
        }
        terms = [copy.deepcopy(term) for _ in range(1000)]
        obj = pod("inference", affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}})
        decision = admitted(engine, obj)
        assert rules(decision) == ["pool-placement"]
        assert "997 more clauses that do not match either" in decision.message
        assert len(decision.message) < 1100

    def test_a_pod_tolerating_everything_without_our_affinity_could_land_on_another_pool(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "inference",
            tolerations=[{"operator": "Exists"}],
            priorityClassName="inference-priority",
            containers=[container(gpus=1)],
        )
        decision = validated(engine, obj)
        assert "pool-placement" in rules(decision)
        assert (
            "inference pod could be scheduled on pool training (gpu-pool=training), which is not "
            "for inference: spec.tolerations[0] {operator: Exists} tolerates "
            "gpu-pool=training:NoSchedule, and neither spec.nodeSelector nor the required node "
            "affinity rules it out; require gpu-pool In [inference]"
        ) in decision.message

    def test_a_requirement_on_an_unknown_label_leaves_the_wrong_pool_possible(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "inference",
            tolerations=[{"operator": "Exists"}],
            priorityClassName="inference-priority",
            containers=[container(gpus=1)],
            affinity=requiring({"key": "rack", "operator": "In", "values": ["r1"]}),
        )
        assert "pool-placement" in rules(validated(engine, obj))

    def test_a_pool_requirement_keeps_a_tolerate_all_pod_on_its_pool(self, engine: Engine) -> None:
        obj = pod(
            "inference",
            tolerations=[{"operator": "Exists"}],
            priorityClassName="inference-priority",
            containers=[container(gpus=1)],
            affinity=requiring({"key": "gpu-pool", "operator": "In", "values": ["inference"]}),
        )
        assert validated(engine, obj).allowed

    def test_keeping_off_the_other_pools_still_lets_a_tolerate_all_pod_onto_pools_not_named(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "inference",
            tolerations=[{"operator": "Exists"}],
            priorityClassName="inference-priority",
            containers=[container(gpus=1)],
            affinity=requiring({"key": "gpu-pool", "operator": "NotIn", "values": ["training"]}),
        )
        decision = validated(engine, obj)
        assert rules(decision) == ["pool-placement"]
        assert "could be scheduled on a GPU node of a pool the policy does not name" in (
            decision.message
        )

    def test_a_missing_toleration_makes_the_own_pool_unreachable(self, engine: Engine) -> None:
        obj = pod(
            "training",
            priorityClassName="training-priority",
            containers=[container(gpus=1)],
            affinity=requiring({"key": "gpu-pool", "operator": "In", "values": ["training"]}),
        )
        decision = validated(engine, obj)
        assert rules(decision) == ["pool-placement"]
        assert "does not tolerate gpu-pool=training:NoSchedule" in decision.message

    def test_a_pod_with_no_toleration_is_told_to_tolerate_not_to_remove_any(
        self, engine: Engine
    ) -> None:
        """Sent unmutated, it has no toleration that could have replaced the class's."""
        obj = pod("training", priorityClassName="training-priority", containers=[container(gpus=1)])

        message = validated(engine, obj).message

        assert "remove the tolerations" not in message
        assert "tolerate them (the mutating webhook adds these tolerations" in message

    def test_a_pod_whose_tolerations_miss_the_pools_is_told_to_remove_them(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "training",
            priorityClassName="training-priority",
            tolerations=[{"key": "other", "operator": "Exists"}],
            containers=[container(gpus=1)],
        )

        assert "remove the tolerations that replace them" in validated(engine, obj).message

    def test_a_model_the_affinity_excludes_makes_the_labelled_model_unreachable(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "training",
            labels={GPU_MODEL: "V100"},
            affinity=requiring({"key": "nvidia-gpu-model", "operator": "In", "values": ["A100"]}),
        )
        decision = admitted(engine, obj)
        assert rules(decision) == ["pool-placement"]
        assert (
            "its pool training (nodes labelled gpu-pool=training, nvidia-gpu-model=V100): "
            f"spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0] "
            "(nvidia-gpu-model In [A100]) does not match nvidia-gpu-model=V100"
        ) in decision.message


class TestWorkloadClass:
    def test_a_gpu_pod_without_a_class_is_told_the_label_and_the_classes(
        self, engine: Engine
    ) -> None:
        decision = validated(engine, pod(containers=[container(gpus=1)]))
        assert rules(decision) == ["workload-class"]
        assert "no label gpu-admission.io/workload" in decision.message
        assert "inference, training" in decision.message

    def test_a_mig_pod_without_a_class_is_refused_too(self, engine: Engine) -> None:
        obj = pod(containers=[container(limits={"nvidia.com/mig-1g.5gb": "1"})])
        assert rules(validated(engine, obj)) == ["workload-class"]

    def test_an_unknown_class_is_refused_with_the_valid_classes(self, engine: Engine) -> None:
        decision = validated(engine, pod("batch"))
        assert rules(decision) == ["workload-class"]
        assert "gpu-admission.io/workload=batch names no workload class" in decision.message


class TestNonGpuPods:
    def test_a_cpu_pod_tolerating_everything_could_land_on_gpu_nodes(self, engine: Engine) -> None:
        decision = validated(engine, pod(tolerations=[{"operator": "Exists"}]))
        assert rules(decision) == ["non-gpu-placement"]
        assert "gpu-pool DoesNotExist" in decision.message

    def test_a_cpu_pod_tolerating_one_pool_is_refused_for_that_pool(self, engine: Engine) -> None:
        toleration = {"key": "gpu-pool", "operator": "Equal", "value": "training"}
        decision = validated(
            engine, pod(tolerations=[{"key": "rack", "operator": "Exists"}, toleration])
        )
        assert (
            "could be scheduled on GPU pool training (spec.tolerations[1] {key: gpu-pool, "
            "operator: Equal, value: training} tolerates gpu-pool=training:NoSchedule, and "
            "neither spec.nodeSelector nor the required node affinity rules it out)"
        ) in decision.message
        assert "inference" not in decision.message

    def test_each_toleration_that_lets_a_cpu_pod_onto_gpu_nodes_is_named(
        self, engine: Engine
    ) -> None:
        tolerations = [{"key": "gpu-pool", "operator": "Exists", "effect": "NoSchedule"}] * 5
        decision = validated(engine, pod(tolerations=tolerations))
        assert (
            "spec.tolerations[0] {key: gpu-pool, operator: Exists, effect: NoSchedule} tolerates "
            "gpu-pool=inference:NoSchedule, gpu-pool=training:NoSchedule, "
            "gpu-pool=<a value of no pool of the policy>:NoSchedule, spec.tolerations[1] "
        ) in decision.message
        assert "spec.tolerations[3]" not in decision.message
        assert "2 more tolerations that do too" in decision.message

    def test_a_cpu_pod_with_a_zero_gpu_limit_counts_as_cpu(self, engine: Engine) -> None:
        obj = pod(containers=[container(limits={"nvidia.com/gpu": "0"})])
        assert validated(engine, obj).allowed


class TestModel:
    def test_a_model_no_pool_of_the_class_has_is_refused_with_the_models_it_has(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, pod("inference", labels={GPU_MODEL: "V100"}))
        assert "gpu-model" in rules(decision)
        assert "models: A100" in decision.message


class TestQuantities:
    @pytest.mark.parametrize(
        ("limits", "requests", "expected"),
        [
            ({"nvidia.com/gpu": "0.5"}, {"nvidia.com/gpu": "0.5"}, "not a whole number"),
            ({"nvidia.com/gpu": "500m"}, {"nvidia.com/gpu": "500m"}, "not a whole number"),
            ({"nvidia.com/gpu": "-1"}, {"nvidia.com/gpu": "-1"}, "negative"),
            ({"nvidia.com/gpu": "two"}, {"nvidia.com/gpu": "two"}, "is not a quantity"),
            ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "1"}, "requests 1 but limits 2"),
        ],
        ids=["fraction", "millis", "negative", "malformed", "unequal"],
    )
    def test_bad_gpu_quantities_are_refused_naming_the_container(
        self, engine: Engine, limits: dict[str, str], requests: dict[str, str], expected: str
    ) -> None:
        obj = pod("training", containers=[container("trainer", limits=limits, requests=requests)])
        decision = admitted(engine, obj)
        assert "gpu-quantity" in rules(decision)
        assert "container 'trainer' nvidia.com/gpu" in decision.message
        assert expected in decision.message

    def test_equal_values_written_differently_are_equal(self, engine: Engine) -> None:
        obj = pod(
            "training",
            containers=[
                container(limits={"nvidia.com/gpu": "1"}, requests={"nvidia.com/gpu": "1000m"})
            ],
        )
        assert admitted(engine, obj).allowed

    def test_a_request_without_a_limit_is_refused(self, engine: Engine) -> None:
        obj = pod(
            "training",
            priorityClassName="training-priority",
            containers=[container(requests={"nvidia.com/gpu": "1"})],
            tolerations=[{"key": "gpu-pool", "operator": "Exists"}],
            affinity=requiring({"key": "gpu-pool", "operator": "In", "values": ["training"]}),
        )
        assert "without a limit" in validated(engine, obj).message


class TestCounts:
    def test_more_gpus_than_any_node_holds_names_both_numbers(self, engine: Engine) -> None:
        decision = admitted(engine, pod("training", containers=[container(gpus=9)]))
        assert rules(decision) == ["gpu-count"]
        assert "requests 9 nvidia.com/gpu; the largest node in pool training has 8" in (
            decision.message
        )

    def test_gpus_of_all_app_containers_add_up(self, engine: Engine) -> None:
        obj = pod("training", containers=[container("a", gpus=5), container("b", gpus=4)])
        assert rules(admitted(engine, obj)) == ["gpu-count"]

    def test_an_ordinary_init_container_runs_alone_and_does_not_add_up(
        self, engine: Engine
    ) -> None:
        obj = pod(
            "training",
            initContainers=[container("prep", gpus=8)],
            containers=[container("a", gpus=8)],
        )
        assert admitted(engine, obj).allowed

    def test_a_sidecar_runs_beside_the_app_and_adds_up(self, engine: Engine) -> None:
        obj = pod(
            "training",
            initContainers=[container("side", gpus=1, restartPolicy="Always")],
            containers=[container("a", gpus=8)],
        )
        assert "requests 9 nvidia.com/gpu" in admitted(engine, obj).message

    def test_an_init_container_after_a_sidecar_adds_to_it(self, engine: Engine) -> None:
        obj = pod(
            "training",
            initContainers=[
                container("side", gpus=2, restartPolicy="Always"),
                container("prep", gpus=7),
            ],
            containers=[container("a", gpus=1)],
        )
        assert "requests 9 nvidia.com/gpu" in admitted(engine, obj).message

    def test_a_model_with_smaller_nodes_is_judged_by_its_own_size(self) -> None:
        text = default_policy_text().replace(
            "V100: {product: V100-SXM2-32GB}", "V100: {product: V100-SXM2-32GB, gpusPerNode: 4}"
        )
        custom = Engine(load_policy_text(text, "custom.yaml"))
        obj = pod("training", labels={GPU_MODEL: "V100"}, containers=[container(gpus=8)])
        assert "pool training with model V100 has 4" in admitted(custom, obj).message
        assert admitted(custom, pod("training", containers=[container(gpus=8)])).allowed


class TestMig:
    @pytest.mark.parametrize(
        ("resource", "count", "expected"),
        [
            ("nvidia.com/mig-3g.40gb", "1", "MIG profile 3g.40gb is not offered by A100-SXM4-40GB"),
            ("nvidia.com/mig-big", "1", "is not a MIG resource name"),
            ("nvidia.com/mig-1g.5gb", "57", "a node in pool inference holds at most 56"),
            ("nvidia.com/mig-7g.40gb", "9", "holds at most 8"),
        ],
        ids=["profile-of-another-gpu", "malformed", "too-many-slices", "too-many-whole-slices"],
    )
    def test_invalid_mig_requests_are_refused(
        self, engine: Engine, resource: str, count: str, expected: str
    ) -> None:
        decision = admitted(
            engine, pod("inference", containers=[container(limits={resource: count})])
        )
        assert rules(decision) == ["mig-profile"]
        assert expected in decision.message

    def test_mig_in_a_pool_without_mig_is_refused(self, engine: Engine) -> None:
        obj = pod("training", containers=[container(limits={"nvidia.com/mig-1g.5gb": "1"})])
        decision = admitted(engine, obj)
        assert rules(decision) == ["mig-profile"]
        assert "offers no MIG slices (training: none)" in decision.message


class TestVisibleDevices:
    @pytest.mark.parametrize(
        "entry",
        [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
            {
                "name": "NVIDIA_VISIBLE_DEVICES",
                "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}},
            },
        ],
        ids=["all", "indices", "empty", "value-from"],
    )
    def test_setting_the_variable_by_hand_is_refused_for_every_pod(
        self, engine: Engine, entry: dict[str, Any]
    ) -> None:
        decision = validated(engine, pod(containers=[container("cuda", env=[entry])]))
        assert rules(decision) == ["visible-devices"]
        assert "container 'cuda' sets NVIDIA_VISIBLE_DEVICES" in decision.message
        assert "request nvidia.com/gpu instead" in decision.message

    @pytest.mark.parametrize("value", ["void", "none"])
    def test_hiding_every_gpu_is_fine(self, engine: Engine, value: str) -> None:
        env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]
        assert validated(engine, pod(containers=[container(env=env)])).allowed

    def test_an_ephemeral_container_is_checked_when_it_is_added(self, engine: Engine) -> None:
        obj = pod(
            containers=[container()],
            ephemeralContainers=[
                container("debug", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
            ],
        )
        decision = validated(engine, obj, operation="UPDATE", subresource="ephemeralcontainers")
        assert rules(decision) == ["visible-devices"]
        assert "ephemeral container 'debug'" in decision.message


class TestPriority:
    def test_a_training_pod_borrowing_inference_priority_is_refused(self, engine: Engine) -> None:
        obj = pod("training", priorityClassName="inference-priority", priority=1000000)
        decision = admitted(engine, obj)
        assert rules(decision) == ["priority-class"]
        assert "'training-priority' (1000)" in decision.message

    def test_a_workload_pod_without_a_priority_class_is_refused(self, engine: Engine) -> None:
        obj = pod(
            "training",
            containers=[container(gpus=1)],
            tolerations=[{"key": "gpu-pool", "operator": "Exists"}],
            affinity=requiring({"key": "gpu-pool", "operator": "In", "values": ["training"]}),
        )
        assert rules(validated(engine, obj)) == ["priority-class"]


class TestScope:
    @pytest.mark.parametrize(
        "overrides",
        [{"operation": "DELETE"}, {"subresource": "status"}, {"subresource": "binding"}],
        ids=["delete", "status", "binding"],
    )
    def test_only_pod_creation_and_update_are_judged(
        self, engine: Engine, overrides: dict[str, Any]
    ) -> None:
        assert validated(engine, pod(containers=[container(gpus=1)]), **overrides).allowed

    def test_every_violation_is_reported_at_once(self, engine: Engine) -> None:
        obj = pod(
            "training",
            priorityClassName="inference-priority",
            containers=[
                container(gpus=9, env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
            ],
        )
        assert sorted(rules(admitted(engine, obj))) == [
            "gpu-count",
            "priority-class",
            "visible-devices",
        ]

    def test_the_denial_names_the_pod_and_uses_code_403(self, engine: Engine) -> None:
        decision = validated(
            engine, pod("batch", name="trainer-0"), namespace="ml", name="trainer-0"
        )
        assert (decision.code, decision.message.split(":")[0]) == (
            403,
            "gpu-admission denied pod 'ml/trainer-0'",
        )


@pytest.fixture(scope="module")
def open_inference() -> Engine:
    """The default policy with its inference pool declared untainted (`taints: []`)."""
    text = default_policy_text().replace(
        "    gpusPerNode: 8\n    # taints default",
        "    gpusPerNode: 8\n    taints: []\n    # taints default",
        1,
    )
    return Engine(load_policy_text(text, "open-inference.yaml"))


class TestUntaintedPools:
    """A pool the policy declares without taints is open to every pod."""

    def test_a_cpu_pod_that_only_the_open_pool_could_take_is_admitted(
        self, open_inference: Engine
    ) -> None:
        assert validated(open_inference, pod()).allowed

    def test_a_cpu_pod_tolerating_the_tainted_pool_is_refused_for_it_alone(
        self, open_inference: Engine
    ) -> None:
        obj = pod(tolerations=[{"key": "gpu-pool", "operator": "Exists"}])

        decision = validated(open_inference, obj)

        assert rules(decision) == ["non-gpu-placement"]
        assert "GPU pool training" in decision.message
        assert (
            "inference" not in decision.message.split("could be scheduled on", 1)[1].split("(")[0]
        )
