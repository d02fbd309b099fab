"""A pod is judged as it was admitted (webhook/engine/rules/fixed_labels.py): an update may
not change the labels it is judged by nor ask the runtime for CDI devices; and a debug
container of any pod that can reach a GPU node may not be privileged."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from tests.builders import container, pod, pod_create
from webhook.engine import Decision, Engine
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text

WORKLOAD = "gpu-admission.io/workload"
MODEL = "gpu-admission.io/gpu-model"
TOLERATES_EVERYTHING = [{"operator": "Exists"}]


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def engine_with(extra: str) -> Engine:
    return Engine(load_policy_text(default_policy_text() + "\n" + extra, "custom.yaml"))


def rules(decision: Decision) -> list[str]:
    return [v.rule for v in decision.violations]


def updated(engine: Engine, old: dict[str, Any], **metadata: Any) -> Decision:
    """The validation of an update of `old` giving its metadata `metadata`."""
    new = copy.deepcopy(old)
    new["metadata"].update(metadata)
    return engine.validate(pod_create(new, operation="UPDATE", old_object=old, name="p"))


def bound_class_pod(workload: str = "inference", **labels: str) -> dict[str, Any]:
    obj = pod(workload, containers=[container(gpus=1)], labels=labels, nodeName="a100-0")
    return obj


class TestTheClassLabels:
    @pytest.mark.parametrize(
        ("labels", "was", "now"),
        [
            ({WORKLOAD: "training"}, "'inference'", "'training'"),
            ({}, "'inference'", "none"),
            ({WORKLOAD: "batch"}, "'inference'", "'batch'"),
        ],
        ids=["another-class", "dropped", "no-such-class"],
    )
    def test_a_class_pod_whose_class_changes_is_refused_saying_from_what_to_what(
        self, engine: Engine, labels: dict[str, str], was: str, now: str
    ) -> None:
        decision = updated(engine, bound_class_pod(), labels=labels)

        assert rules(decision) == ["workload-class"]
        assert f"changes label '{WORKLOAD}' from {was} to {now}" in decision.message
        assert "make the pod again" in decision.message

    def test_a_pod_of_no_class_given_one_by_an_update_is_refused(self, engine: Engine) -> None:
        old = pod(containers=[container()], tolerations=TOLERATES_EVERYTHING)

        decision = updated(engine, old, labels={WORKLOAD: "inference"})

        assert rules(decision) == ["workload-class"]

    @pytest.mark.parametrize("model", ["H100", ""])
    def test_the_gpu_model_label_is_fixed_too(self, engine: Engine, model: str) -> None:
        decision = updated(engine, bound_class_pod(), labels={WORKLOAD: "inference", MODEL: model})

        assert rules(decision) == ["workload-class"]
        assert f"label '{MODEL}' from none" in decision.message

    def test_an_exemption_label_given_by_an_update_exempts_nothing_and_is_refused(self) -> None:
        engine = engine_with(
            "exemptions:\n  - podLabels: {team.example/exempt: burn-in}\n"
            "    namespaces: [ml]\n    reason: node acceptance tests\n"
        )
        labels = {WORKLOAD: "inference", "team.example/exempt": "burn-in"}

        decision = updated(engine, bound_class_pod(), labels=labels)

        assert not decision.allowed
        assert rules(decision) == ["workload-class"]

    def test_a_pod_exempt_as_it_was_admitted_stays_exempt(self) -> None:
        """Its namespace's exemption (node acceptance tests, say) holds for its updates."""
        engine = engine_with(
            "exemptions:\n  - namespaces: [ml]\n    reason: node acceptance tests\n"
        )

        decision = updated(engine, bound_class_pod(), labels={WORKLOAD: "training"})

        assert decision.allowed and not decision.violations

    def test_other_labels_may_change(self, engine: Engine) -> None:
        labels = {WORKLOAD: "inference", "app": "web", "version": "2"}

        assert updated(engine, bound_class_pod(), labels=labels).allowed

    def test_a_cpu_pod_of_no_class_keeps_its_labels_its_own(self, engine: Engine) -> None:
        assert updated(engine, pod(containers=[container()]), labels={MODEL: "H100"}).allowed

    def test_in_warn_mode_the_change_is_admitted_with_a_warning(self) -> None:
        engine = engine_with("enforcement:\n  rules: {workload-class: warn}\n")

        decision = updated(engine, bound_class_pod(), labels={})

        assert decision.allowed
        assert any("changes label" in w for w in decision.warnings)


class TestDeviceAnnotations:
    @pytest.mark.parametrize("key", ["nvidia.cdi.k8s.io/pod", "cdi.k8s.io/gpu"])
    def test_a_cdi_annotation_added_by_an_update_is_refused(self, engine: Engine, key: str) -> None:
        decision = updated(engine, bound_class_pod(), annotations={key: "nvidia.com/gpu=all"})

        assert rules(decision) == ["device-annotations"]
        assert f"the update gives the pod annotation '{key}'" in decision.message

    def test_one_hidden_behind_many_other_annotations_is_found(self, engine: Engine) -> None:
        notes = {f"example.com/note-{i}": "x" for i in range(300)}
        notes["nvidia.cdi.k8s.io/pod"] = "nvidia.com/gpu=all"

        assert rules(updated(engine, bound_class_pod(), annotations=notes)) == [
            "device-annotations"
        ]

    def test_other_annotations_may_change(self, engine: Engine) -> None:
        notes = {"example.com/note": "x", "xcdi.k8s.io/y": "z"}

        assert updated(engine, bound_class_pod(), annotations=notes).allowed


class TestPrivilegedDebugContainers:
    def debug(self, engine: Engine, old: dict[str, Any]) -> Decision:
        new = copy.deepcopy(old)
        new["spec"]["ephemeralContainers"] = [
            {"name": "d", "image": "i", "securityContext": {"privileged": True}}
        ]
        request = pod_create(
            new, operation="UPDATE", subresource="ephemeralcontainers", old_object=old
        )
        patched = jsonpatch.apply_patch(new, list(engine.mutate(request).patch))
        request = pod_create(
            patched, operation="UPDATE", subresource="ephemeralcontainers", old_object=old
        )
        return engine.validate(request)

    def test_in_a_pod_of_no_class_that_can_reach_a_gpu_node_it_is_refused(
        self, engine: Engine
    ) -> None:
        old = pod(containers=[container()], tolerations=TOLERATES_EVERYTHING)

        assert rules(self.debug(engine, old)) == ["privileged-containers"]

    def test_in_a_pod_kept_off_gpu_nodes_it_is_the_namespaces_business(
        self, engine: Engine
    ) -> None:
        assert self.debug(engine, pod(containers=[container()])).allowed
