"""Pods that claim GPUs through Dynamic Resource Allocation: recognised from the templates
and claims they name, mutated without device-plugin GPUs, and judged like GPU resources
(webhook/engine/dra/pod_claims.py, rules/claims.py, claim_objects.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    WORKLOAD,
    admitted,
    claim_objects,
    claim_spec,
    claim_template,
    claiming_pod,
    container,
    dra_engine,
    mutated,
    pod,
    pod_create,
)
from webhook.engine import AdmissionRequest, Engine
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import MAX_SOURCES, ClaimObjects
from webhook.engine.inventory import (
    DeviceClassFacts,
    DeviceFacts,
    Inventory,
    NodeFacts,
    ResourceSliceFacts,
)
from webhook.policy.load import default_policy_text, load_policy_text

ONE_GPU = claim_objects(claim_template("one-gpu"))
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def mixed_engine() -> Engine:
    """Inference on two pools: one of the device plugin, one of DRA."""
    text = default_policy_text().replace(
        "  training:\n    gpusPerNode: 8",
        "  inference-dra:\n    gpusPerNode: 4\n    models:\n      A100: {product: A100-SXM4-40GB}\n"
        "    mig: mixed\n    gpusThrough: dra\n  training:\n    gpusPerNode: 8",
        1,
    )
    text = text.replace("    pools: [inference]", "    pools: [inference, inference-dra]", 1)
    return Engine(load_policy_text(text, "mixed.yaml"))


@pytest.fixture(scope="module")
def engine() -> Engine:
    return dra_engine()


def gpus_of(obj: dict[str, Any]) -> list[str]:
    return [
        resource
        for c in obj["spec"]["containers"]
        for kind in ("limits", "requests")
        for resource in c.get("resources", {}).get(kind, {})
    ]


def pool_values(obj: dict[str, Any]) -> list[str]:
    terms = obj["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    (expression,) = [
        e for e in terms["nodeSelectorTerms"][0]["matchExpressions"] if e["key"] == "gpu-pool"
    ]
    values: list[str] = expression["values"]
    return values


class TestMutation:
    def test_a_pod_claiming_a_gpu_gets_its_class_but_no_device_plugin_gpu(
        self, engine: Engine
    ) -> None:
        result = mutated(engine, claiming_pod(), claims=ONE_GPU)

        assert gpus_of(result) == []
        assert pool_values(result) == ["inference"]
        assert result["spec"]["priorityClassName"] == "inference-priority"
        assert {"key": "gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"} in result["spec"]["tolerations"]  # fmt: skip

    def test_the_container_using_the_claim_keeps_the_gpus_visible_a_sidecar_does_not(
        self, engine: Engine
    ) -> None:
        obj = claiming_pod()
        obj["spec"]["containers"].append(container("sidecar"))

        app, sidecar = mutated(engine, obj, claims=ONE_GPU)["spec"]["containers"]

        assert "env" not in app
        assert sidecar["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]

    def test_a_pod_whose_template_was_not_read_gets_no_device_plugin_gpu_either(
        self, engine: Engine
    ) -> None:
        unread = ClaimObjects(unreadable={ClaimSource(TEMPLATE, "one-gpu"): "timed out"})

        assert gpus_of(mutated(engine, claiming_pod(), claims=unread)) == []

    def test_a_pod_claiming_only_a_nic_gets_the_default_gpu(self, engine: Engine) -> None:
        nic = claim_objects(claim_template("one-gpu", claim_spec("nic.example.com")))

        assert (
            gpus_of(mutated(engine, claiming_pod("training"), claims=nic)) == ["nvidia.com/gpu"] * 2
        )

    def test_in_a_mixed_class_each_kind_of_pod_is_sent_to_its_kind_of_pool(self) -> None:
        engine = mixed_engine()

        assert pool_values(mutated(engine, claiming_pod(), claims=ONE_GPU)) == ["inference-dra"]
        assert pool_values(mutated(engine, pod("inference"))) == ["inference"]

    def test_mutation_is_idempotent(self, engine: Engine) -> None:
        once = mutated(engine, claiming_pod(), claims=ONE_GPU)

        assert engine.mutate(pod_create(once), claims=ONE_GPU).patch == ()


def dra_only_engine() -> Engine:
    """Inference on DRA only."""
    text = default_policy_text().replace("gpusThrough: devicePlugin", "gpusThrough: dra", 1)
    return Engine(load_policy_text(text, "dra-only.yaml"))


class TestPoolsOfDraOnly:
    def test_a_pod_without_claims_gets_no_device_plugin_gpu_and_is_told_to_claim_one(
        self,
    ) -> None:
        engine = dra_only_engine()

        obj = mutated(engine, pod("inference"))
        decision = engine.validate(pod_create(obj))

        assert gpus_of(obj) == []
        assert not decision.allowed
        assert "claim at least 1 GPU with a ResourceClaimTemplate of DeviceClass gpu.nvidia.com" in decision.message  # fmt: skip

    def test_a_pod_requesting_device_plugin_gpus_is_told_to_claim_them(self) -> None:
        decision = admitted(dra_only_engine(), pod("inference", containers=[container(gpus=1)]))

        assert not decision.allowed
        assert "but pool inference gives pods GPUs through Dynamic Resource Allocation only" in decision.message  # fmt: skip


class TestValidation:
    def test_a_pod_claiming_one_gpu_is_admitted(self, engine: Engine) -> None:
        decision = admitted(engine, claiming_pod(), claims=ONE_GPU)

        assert decision.allowed, decision.message
        assert decision.warnings == ()

    def test_a_gpu_claim_without_a_workload_class_is_refused_naming_the_claim(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, claiming_pod(None), claims=ONE_GPU)

        assert not decision.allowed
        assert "claim 'gpu' (ResourceClaimTemplate 'one-gpu')" in decision.message
        assert f"has no label {WORKLOAD}" in decision.message

    def test_nine_gpus_are_refused_with_what_a_node_holds(self, engine: Engine) -> None:
        nine = claim_objects(claim_template("one-gpu", claim_spec(count=9)))

        decision = admitted(engine, claiming_pod("training"), claims=nine)

        assert not decision.allowed
        assert {v.rule for v in decision.violations} == {"gpu-count"}
        assert "pod claims 9 GPUs (claim 'gpu' (ResourceClaimTemplate 'one-gpu') request 'gpu'" in decision.message  # fmt: skip
        assert (
            "the largest node in pool training has 8; claim at most 8 per pod" in decision.message
        )

    def test_claims_of_one_pod_add_up_on_its_one_node(self, engine: Engine) -> None:
        five = claim_objects(
            claim_template("five", claim_spec(count=5)), claim_template("four", claim_spec(count=4))
        )

        decision = admitted(engine, claiming_pod("training", a="five", b="four"), claims=five)

        assert not decision.allowed and "pod claims 9 GPUs" in decision.message

    def test_a_mig_profile_the_pool_does_not_offer_is_refused_with_those_offered(
        self, engine: Engine
    ) -> None:
        mig = claim_spec("mig.nvidia.com", selectors=[PROFILE.format("7g.80gb")])

        decision = admitted(
            engine, claiming_pod(), claims=claim_objects(claim_template("one-gpu", mig))
        )

        assert not decision.allowed
        assert {v.rule for v in decision.violations} == {"mig-profile"}
        assert "asks for MIG profile 7g.80gb, which no node of pool inference offers; offered: 1g.10gb" in decision.message  # fmt: skip

    def test_an_offered_mig_profile_is_admitted(self, engine: Engine) -> None:
        mig = claim_spec("mig.nvidia.com", selectors=[PROFILE.format("1g.5gb")])

        decision = admitted(
            engine, claiming_pod(), claims=claim_objects(claim_template("one-gpu", mig))
        )

        assert decision.allowed, decision.message

    def test_a_product_the_pools_do_not_have_is_refused_with_those_they_have(
        self, engine: Engine
    ) -> None:
        h100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
        objects = claim_objects(claim_template("one-gpu", claim_spec(selectors=[h100])))

        decision = admitted(engine, claiming_pod(), claims=objects)

        assert not decision.allowed
        assert {v.rule for v in decision.violations} == {"gpu-model"}
        assert "which pool inference does not have; it has: A100-SXM4-40GB" in decision.message

    def test_a_container_taking_gpus_both_ways_is_refused(self, engine: Engine) -> None:
        obj = claiming_pod()
        obj["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}

        decision = admitted(engine, obj, claims=ONE_GPU)

        assert not decision.allowed
        assert "container 'app' requests nvidia.com/gpu from the device plugin and uses GPU claim 'gpu'" in decision.message  # fmt: skip

    def test_a_template_that_does_not_exist_is_refused_with_what_to_do(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, claiming_pod(), claims=ClaimObjects(missing=frozenset({ClaimSource(TEMPLATE, "one-gpu")})))  # fmt: skip

        assert not decision.allowed
        assert "claim 'gpu' (ResourceClaimTemplate 'one-gpu') does not exist" in decision.message
        assert "create the ResourceClaimTemplate in the pod's namespace before the pod" in decision.message  # fmt: skip
        assert decision.outcome == "denied"

    def test_a_template_that_could_not_be_read_is_refused_to_try_again(
        self, engine: Engine
    ) -> None:
        unread = ClaimObjects(unreadable={ClaimSource(TEMPLATE, "one-gpu"): "timed out after 2s"})

        decision = admitted(engine, claiming_pod(), claims=unread)

        assert not decision.allowed
        assert "could not be read (timed out after 2s)" in decision.message
        assert "try again" in decision.message
        assert decision.outcome == "error"

    def test_without_a_cluster_to_read_claims_from_a_claiming_pod_is_admitted_with_a_warning(
        self, engine: Engine
    ) -> None:
        decision = admitted(engine, claiming_pod())

        assert decision.allowed, decision.message
        assert decision.warnings == (
            "gpu-admission: claims-not-judged: claim 'gpu' (ResourceClaimTemplate 'one-gpu') "
            "not read, so not judged",
        )

    def test_a_selector_the_policy_cannot_judge_is_admitted_with_a_warning(
        self, engine: Engine
    ) -> None:
        memory = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
        objects = claim_objects(claim_template("one-gpu", claim_spec(selectors=[memory])))

        decision = admitted(engine, claiming_pod(), claims=objects)

        assert decision.allowed, decision.message
        assert [w.split(": ")[1] for w in decision.warnings] == ["claims-not-judged"]

    def test_a_class_whose_pools_take_no_claimed_gpus_refuses_a_claiming_pod(self) -> None:
        engine = Engine(load_policy_text(default_policy_text(), "default.yaml"))

        decision = admitted(engine, claiming_pod(), claims=ONE_GPU)

        assert not decision.allowed
        assert "but pool inference gives pods GPUs through the device plugin only" in decision.message  # fmt: skip

    def test_the_live_inventory_judges_by_the_devices_nodes_publish_now(
        self, engine: Engine
    ) -> None:
        node = NodeFacts("train-0", {"gpu-pool": "training"}, True, {})
        devices = tuple(
            DeviceFacts(f"gpu-{i}", {"type": "gpu", "productName": "NVIDIA A100-SXM4-80GB"})
            for i in range(4)
        )
        slices = (ResourceSliceFacts("s", "gpu.nvidia.com", "train-0", 1, 1, "train-0", devices),)
        inventory = Inventory(nodes=(node,), resource_slices=slices)
        six = claim_objects(claim_template("one-gpu", claim_spec(count=6)))

        decision = admitted(engine, claiming_pod("training"), inventory, six)

        assert not decision.allowed
        assert "the largest node in pool training has 4 now (node train-0)" in decision.message

    def test_a_claim_of_an_administrators_own_gpu_class_is_judged_as_a_gpu_claim(
        self, engine: Engine
    ) -> None:
        selector = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"  # fmt: skip
        classes = {"a100-80.example.com": DeviceClassFacts("a100-80.example.com", (selector,))}
        inventory = Inventory(device_classes=classes)
        nine = claim_objects(claim_template("one-gpu", claim_spec("a100-80.example.com", count=9)))

        unlabelled = admitted(engine, claiming_pod(None), inventory, nine)
        too_many = admitted(engine, claiming_pod("training"), inventory, nine)

        assert not unlabelled.allowed and "has no label" in unlabelled.message
        assert not too_many.allowed and "pod claims 9 GPUs" in too_many.message

    def test_a_deployment_whose_template_claims_too_many_gpus_is_refused(
        self, engine: Engine
    ) -> None:
        template = claiming_pod("training")
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ml"},
            "spec": {"template": {"metadata": template["metadata"], "spec": template["spec"]}},
        }
        request = pod_create(deployment, group="apps", kind="Deployment", resource="deployments")
        nine = claim_objects(claim_template("one-gpu", claim_spec(count=9)))

        assert engine.claim_sources(request) == (ClaimSource(TEMPLATE, "one-gpu"),)
        decision = engine.validate(request, claims=nine)

        assert not decision.allowed and "pod claims 9 GPUs" in decision.message


def claim_object_create(obj: dict[str, Any]) -> AdmissionRequest:
    return pod_create(
        obj,
        group="resource.k8s.io",
        kind=obj["kind"],
        resource="resourceclaimtemplates" if obj["kind"] == TEMPLATE else "resourceclaims",
        name=obj["metadata"]["name"],
    )


class TestClaimObjects:
    def test_a_template_asking_more_gpus_than_any_node_holds_is_refused(
        self, engine: Engine
    ) -> None:
        decision = engine.validate(claim_object_create(claim_template("big", claim_spec(count=9))))

        assert not decision.allowed
        assert decision.message.startswith("gpu-admission denied ResourceClaimTemplate 'ml/big'")
        assert "claim at most 8 per pod" in decision.message

    def test_a_claim_asking_a_mig_profile_no_pool_offers_is_refused(self, engine: Engine) -> None:
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": CLAIM,
            "metadata": {"name": "c", "namespace": "ml"},
            "spec": claim_spec("mig.nvidia.com", selectors=[PROFILE.format("7g.80gb")]),
        }

        decision = engine.validate(claim_object_create(claim))

        assert not decision.allowed and "MIG profile 7g.80gb" in decision.message

    @pytest.mark.parametrize(
        "spec",
        [
            claim_spec(count=8),
            claim_spec("nic.example.com", count=100),
            claim_spec(all_devices=True),
        ],
    )
    def test_templates_a_node_can_satisfy_and_others_devices_are_admitted(
        self, engine: Engine, spec: dict[str, Any]
    ) -> None:
        decision = engine.validate(claim_object_create(claim_template("t", spec)))

        assert decision.allowed, decision.message

    def test_a_malformed_template_is_a_clear_error(self, engine: Engine) -> None:
        broken = claim_template("t", {"devices": {"requests": "all"}})

        decision = engine.validate(claim_object_create(broken))

        assert not decision.allowed and decision.code == 400
        assert "spec.spec.devices.requests" in decision.message


class TestClaimSources:
    def test_a_pod_names_each_template_and_claim_once(self, engine: Engine) -> None:
        obj = claiming_pod(a="t", b="t")
        obj["spec"]["resourceClaims"].append({"name": "c", "resourceClaimName": "shared"})

        assert engine.claim_sources(pod_create(obj)) == (
            ClaimSource(CLAIM, "shared"),
            ClaimSource(TEMPLATE, "t"),
        )

    def test_pods_without_claims_and_other_objects_name_none(self, engine: Engine) -> None:
        assert engine.claim_sources(pod_create(pod("inference"))) == ()
        assert engine.claim_sources(pod_create({"spec": {"resourceClaims": "x"}})) == ()
        assert engine.claim_sources(pod_create(claiming_pod(), operation="DELETE")) == ()

    def test_a_review_reads_a_bounded_number_of_sources(self, engine: Engine) -> None:
        def job(index: int) -> dict[str, Any]:
            claims = {f"c{k}": f"t{index}-{k}" for k in range(32)}
            return {"name": f"j{index}", "template": {"spec": {"template": claiming_pod(**claims)}}}

        jobs = [job(index) for index in range(10)]
        jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"}, "spec": {"replicatedJobs": jobs}}  # fmt: skip
        request = pod_create(jobset, group="jobset.x-k8s.io", kind="JobSet", resource="jobsets")

        assert len(engine.claim_sources(request)) == MAX_SOURCES

    def test_a_pod_whose_sources_were_not_all_read_says_so(self, engine: Engine) -> None:
        decision = admitted(engine, claiming_pod(), claims=ClaimObjects())

        assert not decision.allowed and "was not read" in decision.message


def first_available(*alternatives: tuple[str, str, int], request: str = "gpu") -> dict[str, Any]:
    """A claim's spec with one request met by the first of `alternatives` that can be had:
    (name, DeviceClass, count) each, a selector of product or profile after a ``:``."""
    subrequests = []
    for name, device_class, count in alternatives:
        device_class, _, selected = device_class.partition(":")
        sub: dict[str, Any] = {"name": name, "deviceClassName": device_class, "count": count}
        if selected:
            attribute = "profile" if device_class == "mig.nvidia.com" else "productName"
            expression = f"device.attributes['gpu.nvidia.com'].{attribute} == '{selected}'"
            sub["selectors"] = [{"cel": {"expression": expression}}]
        subrequests.append(sub)
    return {"devices": {"requests": [{"name": request, "firstAvailable": subrequests}]}}


def claiming(spec: dict[str, Any]) -> ClaimObjects:
    return claim_objects(claim_template("one-gpu", spec))


class TestFirstAvailable:
    """Every alternative of a request is a way the pod may run: the scheduler takes the
    first that can be had on the node it tries."""

    def test_a_class_pod_whose_gpu_alternative_no_node_holds_and_falls_back_to_a_nic_is_refused(
        self, engine: Engine
    ) -> None:
        spec = first_available(("big", "gpu.nvidia.com", 99), ("nic", "nic.example.com", 1))

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert not decision.allowed
        assert "request 'gpu' may be met without a GPU" in decision.message
        assert "'gpu/big' (99 GPUs of DeviceClass gpu.nvidia.com) can never be had" in (
            decision.message
        )
        assert "the largest node in pool inference has 8" in decision.message
        assert "so the scheduler takes 'gpu/nic' (1 device of DeviceClass nic.example.com" in (
            decision.message
        )
        assert "holding no GPU of it" in decision.message
        assert "or remove 'gpu/nic'" in decision.message

    def test_a_non_gpu_alternative_a_class_pod_may_get_when_its_gpus_are_taken_is_refused(
        self, engine: Engine
    ) -> None:
        spec = first_available(("one", "gpu.nvidia.com", 1), ("nic", "nic.example.com", 1))

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert not decision.allowed
        assert "takes 'gpu/nic' (1 device of DeviceClass nic.example.com, not a GPU) when " in (
            decision.message
        )

    def test_a_non_gpu_alternative_first_is_taken_wherever_a_node_has_one(
        self, engine: Engine
    ) -> None:
        spec = first_available(("nic", "nic.example.com", 1), ("one", "gpu.nvidia.com", 1))

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert not decision.allowed
        assert "the scheduler takes 'gpu/nic' (1 device of DeviceClass nic.example.com, not a GPU) first" in decision.message  # fmt: skip

    def test_the_same_claim_is_the_business_of_no_class_as_an_object(self, engine: Engine) -> None:
        spec = first_available(("big", "gpu.nvidia.com", 99), ("nic", "nic.example.com", 1))

        decision = engine.validate(claim_object_create(claim_template("t", spec)))

        assert decision.allowed, decision.message

    def test_an_alternative_no_node_holds_is_passed_over_for_the_next(self, engine: Engine) -> None:
        spec = first_available(("big", "gpu.nvidia.com", 99), ("two", "gpu.nvidia.com", 2))

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert decision.allowed, decision.message

    def test_a_request_none_of_whose_alternatives_a_node_holds_is_refused_naming_each(
        self, engine: Engine
    ) -> None:
        spec = first_available(("big", "gpu.nvidia.com", 99), ("less", "gpu.nvidia.com", 20))

        pod_decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))
        object_decision = engine.validate(claim_object_create(claim_template("t", spec)))

        for decision in (pod_decision, object_decision):
            assert not decision.allowed
            assert "request 'gpu' has no alternative a node could give" in decision.message
            assert "'gpu/big' (99 GPUs" in decision.message
            assert "'gpu/less' (20 GPUs" in decision.message

    def test_a_product_the_pool_lacks_falls_back_to_a_mig_profile_it_offers(
        self, engine: Engine
    ) -> None:
        spec = first_available(
            ("h100", "gpu.nvidia.com:NVIDIA H100-SXM5-80GB", 1),
            ("slice", "mig.nvidia.com:3g.20gb", 2),
        )

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert decision.allowed, decision.message

    def test_alternatives_of_several_requests_fit_when_some_choice_fits_one_node(
        self, engine: Engine
    ) -> None:
        spec = claim_spec(count=6, request="base")
        spec["devices"]["requests"] += first_available(
            ("four", "gpu.nvidia.com", 4), ("two", "gpu.nvidia.com", 2), request="more"
        )["devices"]["requests"]

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert decision.allowed, decision.message

    def test_no_choice_fitting_one_node_names_the_choice_the_scheduler_tries_first(
        self, engine: Engine
    ) -> None:
        spec = claim_spec(count=6, request="base")
        spec["devices"]["requests"] += first_available(
            ("four", "gpu.nvidia.com", 4), ("three", "gpu.nvidia.com", 3), request="more"
        )["devices"]["requests"]

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert not decision.allowed
        assert "pod claims 10 GPUs" in decision.message
        assert "alternative 'more/four'" in decision.message

    @pytest.mark.parametrize(
        ("requests", "more", "fits"),
        [(7, 5, True), (9, 2, False)],
        ids=["the fewest fit", "not even the fewest fit"],
    )
    def test_past_the_choices_judged_a_pod_is_refused_only_when_its_fewest_gpus_do_not_fit(
        self, engine: Engine, requests: int, more: int, fits: bool
    ) -> None:
        spec: dict[str, Any] = {"devices": {"requests": []}}
        for index in range(requests):
            spec["devices"]["requests"] += first_available(
                ("more", "gpu.nvidia.com", more), ("one", "gpu.nvidia.com", 1), request=f"r{index}"
            )["devices"]["requests"]

        decision = admitted(engine, claiming_pod("inference"), claims=claiming(spec))

        assert decision.allowed is fits, decision.message
        assert fits or f"pod claims {requests} GPUs" in decision.message

    def test_a_gpu_class_of_the_cluster_s_own_is_a_gpu_alternative(self, engine: Engine) -> None:
        selector = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"  # fmt: skip
        classes = {"gpus.example.com": DeviceClassFacts("gpus.example.com", (selector,))}
        spec = first_available(("one", "gpu.nvidia.com", 1), ("other", "gpus.example.com", 1))

        decision = admitted(
            engine, claiming_pod("inference"), Inventory(device_classes=classes), claiming(spec)
        )

        assert decision.allowed, decision.message
