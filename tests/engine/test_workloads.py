"""Workload objects judged by their pod templates (webhook/engine/workloads.py).

A template is judged as the pod its controller will create: requests
defaulted from limits, our mutation applied, then the pod rules. The denial
names the kind, the object and the template's path.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders import container
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.workloads import field_path
from webhook.policy import load_default_policy

NINE_GPUS = (
    "requests 9 nvidia.com/gpu; the largest node in pool training has 8; "
    "split the work into pods of at most 8"
)


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(load_default_policy())


def template(workload: str | None = "training", gpus: str | None = None) -> dict[str, Any]:
    """A pod template whose container sets GPU limits only, as people write them."""
    labels = {"gpu-admission.io/workload": workload} if workload else {}
    limits = {"nvidia.com/gpu": gpus} if gpus else None
    return {
        "metadata": {"labels": {"app": "x", **labels}},
        "spec": {"containers": [container(limits=limits)]},
    }


def workload(kind: str, tmpl: dict[str, Any], name: str = "llm") -> dict[str, Any]:
    api_version = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    spec: dict[str, Any] = (
        {"schedule": "@daily", "jobTemplate": {"spec": {"template": tmpl}}}
        if kind == "CronJob"
        else {"template": tmpl}
    )
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def request(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> AdmissionRequest:
    group, _, version = obj["apiVersion"].rpartition("/")
    return AdmissionRequest(
        uid="uid-1",
        operation=operation,
        group=group,
        version=version,
        kind=obj["kind"],
        resource=obj["kind"].lower() + "s",
        subresource="",
        namespace="ml",
        name=obj["metadata"]["name"],
        object=obj,
        old_object=old,
    )


def validated(engine: Engine, obj: dict[str, Any], **kwargs: Any) -> Decision:
    return engine.validate(request(obj, **kwargs))


CONTROLLERS = ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"]
TEMPLATE_PATHS = {"CronJob": "spec.jobTemplate.spec.template"}


class TestBuiltInControllers:
    @pytest.mark.parametrize("kind", CONTROLLERS)
    def test_a_template_whose_pods_would_be_refused_is_denied_with_kind_name_and_path(
        self, engine: Engine, kind: str
    ) -> None:
        decision = validated(engine, workload(kind, template(gpus="9")))

        path = TEMPLATE_PATHS.get(kind, "spec.template")
        assert not decision.allowed
        assert decision.code == 403
        assert decision.message == (
            f"gpu-admission denied {kind} 'ml/llm' template ({path}): pod {NINE_GPUS}"
        )
        assert [v.rule for v in decision.violations] == ["gpu-count"]

    @pytest.mark.parametrize("kind", CONTROLLERS)
    def test_a_template_of_pods_that_follow_the_practice_is_allowed(
        self, engine: Engine, kind: str
    ) -> None:
        decision = validated(engine, workload(kind, template(gpus="8")))

        assert decision.allowed, decision.message
        assert decision.patch == ()

    def test_a_gpu_template_without_a_class_is_denied(self, engine: Engine) -> None:
        decision = validated(engine, workload("Job", template(None, gpus="1")))

        assert not decision.allowed
        assert "has no label gpu-admission.io/workload" in decision.message

    def test_a_template_is_judged_after_our_mutation_as_its_pods_will_be(
        self, engine: Engine
    ) -> None:
        # No GPU count, no affinity, no tolerations: refused as written, fine once mutated.
        decision = validated(engine, workload("Deployment", template("inference")))

        assert decision.allowed, decision.message

    def test_a_template_borrowing_a_priority_is_denied_although_mutation_keeps_it(
        self, engine: Engine
    ) -> None:
        tmpl = template(gpus="1")
        tmpl["spec"]["priorityClassName"] = "inference-priority"

        decision = validated(engine, workload("StatefulSet", tmpl))

        assert [v.rule for v in decision.violations] == ["priority-class"]

    def test_the_template_in_the_request_is_never_changed(self, engine: Engine) -> None:
        obj = workload("Deployment", template("inference", gpus="2"))
        before = copy.deepcopy(obj)

        validated(engine, obj)

        assert obj == before

    def test_a_malformed_template_is_a_malformed_object_naming_its_path(
        self, engine: Engine
    ) -> None:
        tmpl = template()
        tmpl["spec"]["containers"] = "not a list"

        decision = validated(engine, workload("Job", tmpl))

        assert decision.code == 400
        assert "spec.template.spec.containers" in decision.message

    def test_a_delete_or_a_status_update_is_not_judged(self, engine: Engine) -> None:
        obj = workload("Deployment", template(gpus="9"))
        for operation in ("DELETE", "CONNECT"):
            assert validated(engine, obj, operation=operation).allowed
        status = request(obj, "UPDATE")
        assert engine.validate(
            AdmissionRequest(**{**_fields(status), "subresource": "status"})
        ).allowed


def _fields(req: AdmissionRequest) -> dict[str, Any]:
    return {name: getattr(req, name) for name in req.__dataclass_fields__}


class TestUpdates:
    def test_an_update_that_keeps_a_refused_template_is_allowed(self, engine: Engine) -> None:
        old = workload("Deployment", template(gpus="9"))
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = 5

        assert validated(engine, new, operation="UPDATE", old=old).allowed

    def test_an_update_that_changes_the_template_is_judged(self, engine: Engine) -> None:
        old = workload("Deployment", template(gpus="9"))
        new = copy.deepcopy(old)
        new["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/app:2"

        decision = validated(engine, new, operation="UPDATE", old=old)

        assert not decision.allowed
        assert NINE_GPUS in decision.message

    def test_an_update_from_an_unreadable_old_object_judges_the_new_one(
        self, engine: Engine
    ) -> None:
        new = workload("Deployment", template(gpus="9"))

        decision = validated(engine, new, operation="UPDATE", old={"spec": []})

        assert not decision.allowed


def pytorch_job(master: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bert"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": master},
                "Worker": {"replicas": 4, "template": worker},
            }
        },
    }


class TestMachineLearningKinds:
    def test_a_pytorch_job_with_a_bad_worker_template_is_denied_naming_the_worker(
        self, engine: Engine
    ) -> None:
        job = pytorch_job(template(gpus="1"), template(gpus="9"))

        decision = validated(engine, job)

        assert decision.message == (
            "gpu-admission denied PyTorchJob 'ml/bert' template "
            f"(spec.pytorchReplicaSpecs.Worker.template): pod {NINE_GPUS}"
        )

    def test_every_bad_template_of_a_job_is_named_in_one_denial(self, engine: Engine) -> None:
        job = pytorch_job(template(None, gpus="1"), template(gpus="9"))

        decision = validated(engine, job)

        assert (
            "(spec.pytorchReplicaSpecs.Master.template): pod requests nvidia.com/gpu but has no label"
            in decision.message
        )
        assert f"; template (spec.pytorchReplicaSpecs.Worker.template): pod {NINE_GPUS}" in (
            decision.message
        )

    def test_a_ray_cluster_with_good_head_and_workers_is_allowed(self, engine: Engine) -> None:
        cluster = {
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "metadata": {"name": "ray"},
            "spec": {
                "headGroupSpec": {"template": template(None)},
                "workerGroupSpecs": [{"template": template(gpus="8")}],
            },
        }
        cluster["spec"]["headGroupSpec"]["template"]["spec"]["nodeSelector"] = {"role": "head"}

        decision = validated(engine, cluster)

        assert decision.allowed, decision.message

    def test_a_kind_the_policy_does_not_list_is_not_judged(self, engine: Engine) -> None:
        obj = {
            "apiVersion": "example.com/v1",
            "kind": "Trainer",
            "metadata": {"name": "t"},
            "spec": {"template": template(gpus="9")},
        }

        assert validated(engine, obj).allowed


@pytest.mark.parametrize(
    ("pointer", "path"),
    [
        ("/spec/template", "spec.template"),
        ("/spec/replicatedJobs/1/template/spec/template", "spec.replicatedJobs[1].template.spec.template"),
        ("/spec/pytorchReplicaSpecs/a~1b/template", "spec.pytorchReplicaSpecs.a/b.template"),
    ],
)  # fmt: skip
def test_a_template_pointer_reads_as_a_field_path(pointer: str, path: str) -> None:
    assert field_path(pointer) == path
