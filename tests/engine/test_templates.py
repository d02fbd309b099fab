"""Pod templates of workload objects, and the pod made of one (webhook/engine/templates.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders import container, pod
from webhook.engine.templates import (
    BUILT_IN_KINDS,
    POD,
    TemplateKind,
    pod_from_template,
    pod_templates,
    template_kind,
)
from webhook.errors import MalformedObject

PYTORCH_JOB = TemplateKind("kubeflow.org", "PyTorchJob", ("/spec/pytorchReplicaSpecs/*/template",))
JOBSET = TemplateKind(
    "jobset.x-k8s.io", "JobSet", ("/spec/replicatedJobs/*/template/spec/template",)
)


def template(*containers: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels or {"gpu-admission.io/workload": "training"}},
        "spec": {"containers": list(containers) or [container()]},
    }


def workload(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, "spec": spec}


def templates_of(
    obj: dict[str, Any], kinds: tuple[TemplateKind, ...] = BUILT_IN_KINDS
) -> list[tuple[str, Any]]:
    kind = template_kind(obj, kinds)
    assert kind is not None
    return pod_templates(obj, kind)


class TestFindingTemplates:
    @pytest.mark.parametrize(
        ("api_version", "kind"),
        [("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
         ("apps/v1", "ReplicaSet"), ("batch/v1", "Job")],
    )  # fmt: skip
    def test_a_controller_holds_its_template_at_spec_template(
        self, api_version: str, kind: str
    ) -> None:
        inner = template()
        assert templates_of(workload(api_version, kind, {"template": inner})) == [
            ("/spec/template", inner)
        ]

    def test_a_cronjob_holds_its_template_inside_its_job_template(self) -> None:
        inner = template()
        cron_job = workload(
            "batch/v1",
            "CronJob",
            {"schedule": "@daily", "jobTemplate": {"spec": {"template": inner}}},
        )
        assert templates_of(cron_job) == [("/spec/jobTemplate/spec/template", inner)]

    def test_a_pod_is_its_own_template_at_the_empty_pointer(self) -> None:
        obj = pod("inference")
        assert templates_of(obj) == [("", obj)]

    @pytest.mark.parametrize(
        "obj",
        [
            {"apiVersion": "v1", "kind": "ConfigMap", "data": {}},
            workload("example.com/v1", "Deployment", {"template": template()}),
            workload("apps/v1", "Pod", {"containers": []}),
            {"kind": "Deployment"},
        ],
        ids=[
            "configmap",
            "deployment-of-another-group",
            "pod-outside-the-core-group",
            "no-apiversion",
        ],
    )
    def test_an_object_of_a_kind_outside_the_table_holds_no_known_template(
        self, obj: dict[str, Any]
    ) -> None:
        assert template_kind(obj) is None

    def test_a_wildcard_finds_the_template_of_every_replica_type_with_an_escaped_pointer(
        self,
    ) -> None:
        master, worker = template(), template()
        job = workload(
            "kubeflow.org/v1",
            "PyTorchJob",
            {"pytorchReplicaSpecs": {"Master": {"template": master}, "a/b": {"template": worker}}},
        )
        assert templates_of(job, (PYTORCH_JOB,)) == [
            ("/spec/pytorchReplicaSpecs/Master/template", master),
            ("/spec/pytorchReplicaSpecs/a~1b/template", worker),
        ]

    def test_a_wildcard_over_a_list_finds_each_item_by_index(self) -> None:
        first, second = template(), template()
        job_set = workload("jobset.x-k8s.io/v1alpha2", "JobSet", {"replicatedJobs": [
            {"name": "leader", "template": {"spec": {"template": first}}},
            {"name": "workers", "template": {"spec": {"template": second}}},
        ]})  # fmt: skip
        assert templates_of(job_set, (JOBSET,)) == [
            ("/spec/replicatedJobs/0/template/spec/template", first),
            ("/spec/replicatedJobs/1/template/spec/template", second),
        ]

    def test_a_wildcard_over_a_missing_collection_finds_nothing(self) -> None:
        assert templates_of(workload("kubeflow.org/v1", "PyTorchJob", {}), (PYTORCH_JOB,)) == []

    def test_a_template_left_out_is_not_judged(self) -> None:
        # LeaderWorkerSet's leaderTemplate is optional (the workerTemplate serves both);
        # a kind that requires its template has kube-apiserver or its operator say so.
        assert templates_of(workload("apps/v1", "Deployment", {"replicas": 1})) == []

    def test_a_template_that_is_not_a_mapping_is_malformed(self) -> None:
        with pytest.raises(
            MalformedObject, match=r"^spec\.template: a pod template must be a mapping$"
        ):
            templates_of(workload("batch/v1", "Job", {"template": ["not", "a", "template"]}))

    def test_a_cronjob_whose_job_template_is_a_list_is_malformed_at_that_step(self) -> None:
        with pytest.raises(MalformedObject, match=r"^spec\.jobTemplate: must be a mapping$"):
            templates_of(workload("batch/v1", "CronJob", {"jobTemplate": []}))

    def test_the_pod_kind_is_among_the_built_in_kinds(self) -> None:
        assert POD in BUILT_IN_KINDS


class TestPodFromTemplate:
    def test_the_pod_is_a_core_v1_pod_with_the_templates_metadata_and_spec(self) -> None:
        inner = template(container(gpus=1))
        assert pod_from_template(inner) == {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": inner["metadata"],
            "spec": inner["spec"],
        }

    def test_a_template_without_metadata_makes_a_pod_with_empty_metadata(self) -> None:
        assert pod_from_template({"spec": {"containers": []}})["metadata"] == {}

    def test_limits_without_requests_become_requests_as_pod_defaulting_does(self) -> None:
        inner = template(container(limits={"nvidia.com/gpu": 2, "memory": "1Gi"}))
        resources = pod_from_template(inner)["spec"]["containers"][0]["resources"]
        assert resources == {
            "limits": {"nvidia.com/gpu": 2, "memory": "1Gi"},
            "requests": {"nvidia.com/gpu": 2, "memory": "1Gi"},
        }

    def test_a_request_already_given_is_kept_and_only_the_missing_ones_are_added(self) -> None:
        inner = template(
            container(limits={"nvidia.com/gpu": "2", "cpu": "4"}, requests={"cpu": "1"})
        )
        requests = pod_from_template(inner)["spec"]["containers"][0]["resources"]["requests"]
        assert requests == {"cpu": "1", "nvidia.com/gpu": "2"}

    def test_init_containers_are_defaulted_and_ephemeral_containers_are_not(self) -> None:
        limits = {"nvidia.com/gpu": "1"}
        inner = template(container())
        inner["spec"]["initContainers"] = [container("prep", limits=limits)]
        inner["spec"]["ephemeralContainers"] = [container("debug", limits=limits)]
        spec = pod_from_template(inner)["spec"]
        assert spec["initContainers"][0]["resources"]["requests"] == limits
        assert "requests" not in spec["ephemeralContainers"][0]["resources"]

    def test_the_template_is_not_changed(self) -> None:
        inner = template(container("a", limits={"nvidia.com/gpu": "1"}), container("b"))
        before = copy.deepcopy(inner)
        pod_from_template(inner)
        assert inner == before

    def test_only_what_defaulting_changes_is_copied(self) -> None:
        untouched = container("b", gpus=1)
        inner = template(container("a", limits={"nvidia.com/gpu": "1"}), untouched)
        spec = pod_from_template(inner)["spec"]
        assert spec is not inner["spec"]
        assert spec["containers"][0] is not inner["spec"]["containers"][0]
        assert spec["containers"][1] is untouched

    def test_a_spec_with_nothing_to_default_is_the_templates_own(self) -> None:
        inner = template(container(gpus=1), container("cpu-only"))
        assert pod_from_template(inner)["spec"] is inner["spec"]

    def test_a_wrongly_shaped_spec_is_passed_on_for_the_pod_reader_to_refuse(self) -> None:
        inner = {
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"limits": {"x": "1"}, "requests": "nope"}}
                ]
            }
        }
        assert pod_from_template(inner)["spec"] is inner["spec"]
