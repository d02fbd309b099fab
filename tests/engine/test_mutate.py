"""Mutation of workload pods at CREATE (webhook/engine/mutate.py)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.builders import (
    GPU_MODEL,
    claim_objects,
    claim_spec,
    claim_template,
    claiming_container,
    container,
    dra_engine,
    from_templates,
    mutated,
    pod,
    pod_create,
)
from webhook.engine import Engine
from webhook.engine.dra.pod_claims import pod_claims
from webhook.engine.inventory import DeviceClassFacts, Inventory
from webhook.engine.mutate import INJECTED_ANNOTATION, REVISION_ANNOTATION, mutate_pod
from webhook.engine.pod import read_pod
from webhook.policy import load_default_policy, load_policy_file
from webhook.policy.load import default_policy_text, load_policy_text

POLICIES = Path(__file__).resolve().parents[2] / "policies"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def required_terms(obj: dict[str, Any]) -> list[dict[str, Any]]:
    terms: list[dict[str, Any]] = obj["spec"]["affinity"]["nodeAffinity"][REQUIRED][
        "nodeSelectorTerms"
    ]
    return terms


def resources_of(obj: dict[str, Any], index: int = 0) -> dict[str, Any]:
    resources: dict[str, Any] = obj["spec"]["containers"][index]["resources"]
    return resources


POOL_INFERENCE = {"key": "gpu-pool", "operator": "In", "values": ["inference"]}
POOL_TRAINING = {"key": "gpu-pool", "operator": "In", "values": ["training"]}


class TestGpuCount:
    def test_a_pod_without_gpus_gets_the_class_default_on_its_first_container(
        self, engine: Engine
    ) -> None:
        result = mutated(engine, pod("inference", containers=[container("a"), container("b")]))
        assert resources_of(result) == {
            "limits": {"nvidia.com/gpu": "1"},
            "requests": {"nvidia.com/gpu": "1"},
        }
        assert "resources" not in result["spec"]["containers"][1]

    def test_a_limit_alone_is_copied_to_the_request(self, engine: Engine) -> None:
        result = mutated(
            engine, pod("inference", containers=[container(limits={"nvidia.com/gpu": 2})])
        )
        assert resources_of(result)["requests"] == {"nvidia.com/gpu": 2}

    def test_a_request_alone_is_copied_to_the_limit(self, engine: Engine) -> None:
        result = mutated(
            engine,
            pod("training", containers=[container(requests={"nvidia.com/gpu": "4", "cpu": "1"})]),
        )
        assert resources_of(result)["limits"] == {"nvidia.com/gpu": "4"}
        assert resources_of(result)["requests"] == {"nvidia.com/gpu": "4", "cpu": "1"}

    def test_unequal_requests_and_limits_are_left_for_validation(self, engine: Engine) -> None:
        original = pod(
            "training",
            containers=[
                container(limits={"nvidia.com/gpu": "2"}, requests={"nvidia.com/gpu": "1"})
            ],
        )
        assert resources_of(mutated(engine, original)) == resources_of(original)

    def test_a_mig_slice_counts_as_a_gpu_so_no_default_is_added(self, engine: Engine) -> None:
        result = mutated(
            engine, pod("inference", containers=[container(limits={"nvidia.com/mig-1g.5gb": "1"})])
        )
        assert resources_of(result) == {
            "limits": {"nvidia.com/mig-1g.5gb": "1"},
            "requests": {"nvidia.com/mig-1g.5gb": "1"},
        }

    def test_a_gpu_in_an_init_container_counts_too(self, engine: Engine) -> None:
        result = mutated(
            engine,
            pod("training", initContainers=[container("prep", gpus=1)], containers=[container()]),
        )
        assert "nvidia.com/gpu" not in result["spec"]["containers"][0].get("resources", {}).get(
            "limits", {}
        )

    def test_an_existing_resources_mapping_gets_a_key_with_an_escaped_pointer(
        self, engine: Engine
    ) -> None:
        original = pod(
            "inference",
            containers=[container(limits={"nvidia.com/gpu": "1"}, requests={"cpu": "1"})],
        )
        decision = engine.mutate(pod_create(original))
        assert {
            "op": "add",
            "path": "/spec/containers/0/resources/requests/nvidia.com~1gpu",
            "value": "1",
        } in decision.patch


class TestNodeAffinity:
    def test_a_pod_without_affinity_requires_its_pool(self, engine: Engine) -> None:
        assert required_terms(mutated(engine, pod("inference"))) == [
            {"matchExpressions": [POOL_INFERENCE]}
        ]

    def test_the_pool_is_anded_into_every_existing_term(self, engine: Engine) -> None:
        terms = [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        ]
        original = pod(
            "training", affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}
        )
        result = required_terms(mutated(engine, original))
        assert result[0]["matchExpressions"] == [terms[0]["matchExpressions"][0], POOL_TRAINING]
        assert result[1]["matchExpressions"] == [POOL_TRAINING]
        assert result[1]["matchFields"] == terms[1]["matchFields"]

    def test_an_empty_term_stays_empty_because_it_matches_no_node(self, engine: Engine) -> None:
        terms = [{}, {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
        original = pod(
            "training", affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}
        )
        assert required_terms(mutated(engine, original))[0] == {}

    def test_an_expression_already_there_is_not_added_again(self, engine: Engine) -> None:
        terms = [
            {"matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": ["inference"]}]}
        ]
        original = pod(
            "inference", affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}
        )
        decision = engine.mutate(pod_create(original))
        assert not any("nodeAffinity" in op["path"] for op in decision.patch)

    def test_a_gpu_model_label_narrows_placement_to_that_model(self, engine: Engine) -> None:
        result = mutated(engine, pod("training", labels={GPU_MODEL: "V100"}))
        assert required_terms(result) == [
            {
                "matchExpressions": [
                    POOL_TRAINING,
                    {"key": "nvidia-gpu-model", "operator": "In", "values": ["V100"]},
                ]
            }
        ]

    def test_an_unknown_model_is_not_injected_but_left_for_validation(self, engine: Engine) -> None:
        result = mutated(engine, pod("training", labels={GPU_MODEL: "H100"}))
        assert required_terms(result) == [{"matchExpressions": [POOL_TRAINING]}]

    def test_existing_preferred_affinity_and_pod_affinity_survive(self, engine: Engine) -> None:
        preferred = [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
        ]
        original = pod(
            "inference",
            affinity={"nodeAffinity": {PREFERRED: preferred}, "podAntiAffinity": {"x": 1}},
        )
        result = mutated(engine, original)
        assert result["spec"]["affinity"]["nodeAffinity"][PREFERRED] == preferred
        assert result["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}


class TestTolerations:
    def test_a_pod_gets_a_toleration_for_its_pool_taint(self, engine: Engine) -> None:
        assert mutated(engine, pod("training"))["spec"]["tolerations"] == [
            {"key": "gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
        ]

    @pytest.mark.parametrize(
        "toleration",
        [
            {"operator": "Exists"},
            {"key": "gpu-pool", "operator": "Exists"},
            {"key": "gpu-pool", "operator": "Equal", "value": "training"},
            {"key": "gpu-pool", "value": "training", "effect": "NoSchedule"},
        ],
    )
    def test_a_toleration_that_already_tolerates_the_taint_is_enough(
        self, engine: Engine, toleration: dict[str, str]
    ) -> None:
        result = mutated(engine, pod("training", tolerations=[toleration]))
        assert result["spec"]["tolerations"] == [toleration]

    def test_a_toleration_for_another_taint_is_kept_and_ours_appended(self, engine: Engine) -> None:
        other = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
        result = mutated(engine, pod("inference", tolerations=[other]))
        assert result["spec"]["tolerations"] == [
            other,
            {"key": "gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"},
        ]


class TestPriority:
    def test_a_pod_gets_its_class_priority_name_and_value(self, engine: Engine) -> None:
        spec = mutated(engine, pod("inference"))["spec"]
        assert (spec["priorityClassName"], spec["priority"]) == ("inference-priority", 1000000)

    def test_the_priority_admission_plugins_zero_is_replaced(self, engine: Engine) -> None:
        decision = engine.mutate(pod_create(pod("training", priority=0)))
        assert {"op": "replace", "path": "/spec/priority", "value": 1000} in decision.patch

    def test_a_pod_naming_its_own_class_is_left_alone(self, engine: Engine) -> None:
        original = pod("training", priorityClassName="training-priority", priority=1000)
        decision = engine.mutate(pod_create(original))
        assert not any("priority" in op["path"].lower() for op in decision.patch)

    def test_a_pod_naming_another_class_is_left_for_validation(self, engine: Engine) -> None:
        original = pod("training", priorityClassName="inference-priority", priority=1000000)
        spec = mutated(engine, original)["spec"]
        assert (spec["priorityClassName"], spec["priority"]) == ("inference-priority", 1000000)

    def test_a_class_preemption_policy_is_set_too(self) -> None:
        text = default_policy_text().replace(
            "priorityClass: {name: training-priority, value: 1000}",
            "priorityClass: {name: training-priority, value: 1000, preemptionPolicy: Never}",
        )
        custom = Engine(load_policy_text(text, "custom.yaml"))
        assert mutated(custom, pod("training"))["spec"]["preemptionPolicy"] == "Never"


class TestCoLocation:
    def test_pods_of_one_job_prefer_the_same_zone(self, engine: Engine) -> None:
        labels = {"batch.kubernetes.io/job-name": "resnet", "gpu-admission.io/job": "other"}
        result = mutated(engine, pod("training", labels=labels))
        assert result["spec"]["affinity"]["podAffinity"][PREFERRED] == [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "resnet"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                },
            }
        ]

    def test_the_first_job_label_present_is_used(self, engine: Engine) -> None:
        labels = {"training.kubeflow.org/job-name": "bert", "gpu-admission.io/job": "other"}
        term = mutated(engine, pod("training", labels=labels))["spec"]["affinity"]["podAffinity"]
        assert term[PREFERRED][0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == {
            "training.kubeflow.org/job-name": "bert"
        }

    def test_a_pod_without_a_job_label_gets_no_hint(self, engine: Engine) -> None:
        assert "podAffinity" not in mutated(engine, pod("training"))["spec"]["affinity"]

    def test_inference_pods_get_no_hint(self, engine: Engine) -> None:
        labels = {"batch.kubernetes.io/job-name": "resnet"}
        assert (
            "podAffinity"
            not in mutated(engine, pod("inference", labels=labels))["spec"]["affinity"]
        )


class TestIsolation:
    def test_a_sidecar_without_gpus_sees_no_gpu(self, engine: Engine) -> None:
        original = pod("inference", containers=[container(gpus=1), container("proxy")])
        result = mutated(engine, original)
        assert result["spec"]["containers"][1]["env"] == [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
        ]
        assert "env" not in result["spec"]["containers"][0]

    def test_init_containers_without_gpus_see_no_gpu_either(self, engine: Engine) -> None:
        original = pod(
            "inference", initContainers=[container("fetch", env=[{"name": "A", "value": "1"}])]
        )
        result = mutated(engine, original)
        assert result["spec"]["initContainers"][0]["env"] == [
            {"name": "A", "value": "1"},
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
        ]

    def test_the_container_that_received_the_default_gpu_is_not_isolated(
        self, engine: Engine
    ) -> None:
        result = mutated(engine, pod("inference", containers=[container("a"), container("b")]))
        assert "env" not in result["spec"]["containers"][0]
        assert result["spec"]["containers"][1]["env"][0]["value"] == "void"

    def test_a_container_setting_the_variable_itself_is_left_to_validation(
        self, engine: Engine
    ) -> None:
        env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]
        original = pod("inference", containers=[container(gpus=1), container("b", env=env)])
        assert mutated(engine, original)["spec"]["containers"][1]["env"] == env


class TestWhatIsNotMutated:
    @pytest.mark.parametrize(
        "overrides",
        [
            {"operation": "UPDATE"},
            {"operation": "DELETE", "object": None},
            {"operation": "CONNECT", "object": None},
            {"subresource": "status"},
            {"kind": "Deployment", "group": "apps", "resource": "deployments"},
        ],
        ids=["update", "delete", "connect", "status", "other-kind"],
    )
    def test_requests_that_are_not_a_pod_create_pass_unchanged(
        self, engine: Engine, overrides: dict[str, Any]
    ) -> None:
        decision = engine.mutate(pod_create(pod("inference"), **overrides))
        assert decision.allowed and not decision.patch

    def test_a_pod_without_the_workload_label_is_not_mutated(self, engine: Engine) -> None:
        decision = engine.mutate(pod_create(pod(containers=[container(gpus=1)])))
        assert decision.allowed and not decision.patch

    def test_a_pod_of_an_unknown_class_is_not_mutated(self, engine: Engine) -> None:
        decision = engine.mutate(pod_create(pod("batch")))
        assert decision.allowed and not decision.patch

    def test_a_malformed_pod_is_refused_with_code_400(self, engine: Engine) -> None:
        decision = engine.mutate(pod_create({"metadata": {}, "spec": []}))
        assert (decision.allowed, decision.code) == (False, 400)
        assert "spec" in decision.message


class TestWholePatch:
    def test_the_mutated_pod_needs_no_second_patch(self, engine: Engine) -> None:
        original = pod(
            "training",
            labels={"batch.kubernetes.io/job-name": "j", GPU_MODEL: "A100"},
            containers=[container(limits={"nvidia.com/gpu": "8"}), container("log")],
            initContainers=[container("side", restartPolicy="Always")],
            priority=0,
        )
        once = mutated(engine, original)
        assert engine.mutate(pod_create(once)).patch == ()

    def test_the_received_pod_is_never_changed_and_unknown_fields_survive(
        self, engine: Engine
    ) -> None:
        original = pod("inference", futureField={"a": [1, 2]}, affinity=None)
        original["metadata"]["annotations"] = {"x/y~z": "1"}
        before = copy.deepcopy(original)
        result = mutated(engine, original)
        assert original == before
        assert result["spec"]["futureField"] == {"a": [1, 2]}
        annotations = result["metadata"]["annotations"]
        assert annotations["x/y~z"] == "1"  # the user's, kept beside ours
        assert annotations[INJECTED_ANNOTATION] == "affinity,tolerations,priority,gpu-limits"
        assert {k: v for k, v in result["metadata"].items() if k != "annotations"} == {
            k: v for k, v in before["metadata"].items() if k != "annotations"
        }

    def test_the_pod_is_annotated_with_what_was_injected_and_the_policys_revision(
        self, engine: Engine
    ) -> None:
        result = mutated(engine, pod("inference"))

        annotations = result["metadata"]["annotations"]
        assert annotations[INJECTED_ANNOTATION] == "affinity,tolerations,priority,gpu-limits"
        assert annotations[REVISION_ANNOTATION] == engine.policy.revision
        assert len(engine.policy.revision) == 12

    def test_a_pod_of_no_class_or_with_nothing_to_inject_is_not_annotated(
        self, engine: Engine
    ) -> None:
        assert "annotations" not in mutated(engine, pod())["metadata"]
        once = mutated(engine, pod("inference"))
        assert engine.mutate(pod_create(once)).patch == ()


@pytest.fixture(scope="module")
def overflow() -> Engine:
    return Engine(load_policy_file(POLICIES / "overflow.yaml"))


class TestOverflowPolicy:
    def test_inference_may_use_both_pools_but_prefers_its_own(self, overflow: Engine) -> None:
        result = mutated(overflow, pod("inference"))
        node_affinity = result["spec"]["affinity"]["nodeAffinity"]
        assert node_affinity[REQUIRED]["nodeSelectorTerms"] == [
            {
                "matchExpressions": [
                    {"key": "gpu-pool", "operator": "In", "values": ["inference", "training"]}
                ]
            }
        ]
        assert node_affinity[PREFERRED] == [
            {"weight": 100, "preference": {"matchExpressions": [POOL_INFERENCE]}}
        ]
        assert [t["value"] for t in result["spec"]["tolerations"]] == ["inference", "training"]
        assert overflow.mutate(pod_create(result)).patch == ()


NVIDIA_GPU_SELECTOR = (
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
)
"""What the NVIDIA DRA driver's own GPU DeviceClass selects: its whole GPUs."""


@pytest.fixture(scope="module")
def inventory() -> Inventory:
    """A cluster with a GPU DeviceClass of its own beside the policy's."""
    facts = DeviceClassFacts("gpus.example.com", (NVIDIA_GPU_SELECTOR,))
    return Inventory(device_classes={"gpus.example.com": facts})


class TestGpuClassesThePolicyDoesNotName:
    """A claim of a DeviceClass of the cluster's that picks the GPU driver's GPUs asks for
    GPUs, for mutation as for validation."""

    def claiming_pod(self) -> dict[str, Any]:
        return pod(
            "training",
            containers=[container("sidecar"), claiming_container("app")],
            resourceClaims=from_templates(gpu="one-gpu"),
        )

    def test_the_container_holding_its_claim_keeps_its_gpus_visible_and_none_is_given_one(
        self, inventory: Inventory
    ) -> None:
        engine = dra_engine()
        template = claim_template("one-gpu", claim_spec("gpus.example.com"))

        result = mutated(engine, self.claiming_pod(), inventory, claim_objects(template))

        sidecar, app = result["spec"]["containers"]
        assert "nvidia.com/gpu" not in str(result["spec"]["containers"])
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in sidecar["env"]
        assert "env" not in app

    def test_mutation_reads_claims_through_the_inventory_s_view_whoever_resolved_them(
        self, inventory: Inventory
    ) -> None:
        engine = dra_engine()
        objects = claim_objects(claim_template("one-gpu", claim_spec("gpus.example.com")))
        view = read_pod(self.claiming_pod(), engine.policy)
        workload = engine.policy.classes["training"]
        read_without_it = pod_claims(engine.policy, view, objects)

        patch = mutate_pod(
            engine.policy, view, workload, engine.capacity(inventory), read_without_it
        )

        assert not any("nvidia.com/gpu" in str(operation) for operation in patch)
