"""Workload controllers through kubectl apply: bad pod templates fail at once.

A Deployment, Job, CronJob or PyTorchJob whose pod template breaks a rule is
refused by `validate-workloads.gpu-admission.io` when it is applied, with the
kind, the name and the template's path; valid ones are stored and their pods
are mutated at creation as before.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .admission_fixtures import example
from .controlplane import ControlPlane

DENIED = 'admission webhook "validate-workloads.gpu-admission.io" denied the request'
TOO_MANY = "requests 9 nvidia.com/gpu; the largest node in pool training has 8"
NO_CLASS = "has no label gpu-admission.io/workload"
BORROWED = "training pod uses priorityClassName 'inference-priority'"


def crd(group: str, kind: str, version: str) -> dict[str, Any]:
    """A CustomResourceDefinition that stores anything, as an operator's CRD would for us."""
    plural = f"{kind.lower()}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


@contextlib.contextmanager
def custom_kind(controlplane: ControlPlane, definition: dict[str, Any]) -> Iterator[None]:
    """The kind served by the test apiserver (without its operator) until the block ends."""
    name = definition["metadata"]["name"]
    controlplane.apply(json.dumps(definition))
    try:
        controlplane.kubectl("wait", "--for=condition=Established", "--timeout=30s", f"crd/{name}")
        controlplane.wait_for(
            lambda: controlplane.kubectl("get", name, check=False).returncode == 0,
            what=f"{name} in discovery",
        )
        yield
    finally:
        controlplane.kubectl("delete", "crd", name, "--wait=true")


def training_template(limits: dict[str, Any], **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "trainer",
                    "image": "registry.example/t:1",
                    "resources": {"limits": limits},
                }
            ],
        },
    }


TRAINING = {"gpu-admission.io/workload": "training"}


def deployment(gpus: int) -> str:
    manifest = yaml.safe_load(example("inference-deployment.yaml"))
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {
        "nvidia.com/gpu": gpus
    }
    return json.dumps(manifest)


def job(template: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train"},
            "spec": {"template": template},
        }
    )


def cron_job(template: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "nightly"},
            "spec": {
                "schedule": "0 0 1 1 *",
                "jobTemplate": {"spec": {"template": template}},
            },
        }
    )


def pytorch_job(worker: dict[str, Any]) -> str:
    master = training_template({"nvidia.com/gpu": 1}, **TRAINING)
    return json.dumps(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "bert"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": master},
                    "Worker": {"replicas": 2, "template": worker},
                }
            },
        }
    )


def assert_denied(result: Any, *parts: str) -> None:
    assert result.returncode != 0, result.stdout
    assert DENIED in result.stderr
    for part in parts:
        assert part in result.stderr


def test_a_deployment_whose_pods_would_be_refused_fails_at_apply(
    controlplane: ControlPlane, opted_in: str
) -> None:
    result = controlplane.apply(deployment(9), namespace=opted_in, check=False)

    assert_denied(
        result,
        f"Deployment '{opted_in}/llm-server' template (spec.template):",
        "requests 9 nvidia.com/gpu; the largest node in pool inference has 8",
    )
    assert not controlplane.exists("deployment", "llm-server", opted_in)


def test_a_job_whose_gpu_pods_have_no_class_fails_at_apply(
    controlplane: ControlPlane, opted_in: str
) -> None:
    result = controlplane.apply(
        job(training_template({"nvidia.com/gpu": 1})), namespace=opted_in, check=False
    )

    assert_denied(result, f"Job '{opted_in}/train' template (spec.template):", NO_CLASS)
    assert not controlplane.exists("job", "train", opted_in)


def test_a_cron_job_borrowing_a_priority_fails_at_apply(
    controlplane: ControlPlane, opted_in: str
) -> None:
    template = training_template({"nvidia.com/gpu": 1}, **TRAINING)
    template["spec"]["priorityClassName"] = "inference-priority"

    result = controlplane.apply(cron_job(template), namespace=opted_in, check=False)

    assert_denied(
        result,
        f"CronJob '{opted_in}/nightly' template (spec.jobTemplate.spec.template):",
        BORROWED,
    )


def test_valid_workloads_are_accepted_and_their_pods_mutated(
    controlplane: ControlPlane, opted_in: str
) -> None:
    controlplane.apply(deployment(1), namespace=opted_in)
    controlplane.apply(cron_job(training_template({"nvidia.com/gpu": 8}, **TRAINING)), opted_in)
    controlplane.apply(job(training_template({"nvidia.com/gpu": 8}, **TRAINING)), opted_in)

    pods = controlplane.wait_for(
        lambda: controlplane.list_json("pods", opted_in, "batch.kubernetes.io/job-name=train"),
        what="the Job's pod",
    )
    assert pods[0]["spec"]["priorityClassName"] == "training-priority"
    assert controlplane.exists("cronjob", "nightly", opted_in)
    server = controlplane.wait_for(
        lambda: controlplane.list_json("pods", opted_in, "app=llm-server"),
        what="the Deployment's pods",
    )[0]
    assert server["spec"]["priorityClassName"] == "inference-priority"


def test_a_deployment_from_before_the_opt_in_can_be_scaled_but_not_changed(
    controlplane: ControlPlane, plain_namespace: str
) -> None:
    controlplane.apply(deployment(9), namespace=plain_namespace)
    controlplane.kubectl("label", "namespace", plain_namespace, "gpu-admission.io/enabled=true")

    controlplane.kubectl("scale", "deployment/llm-server", "--replicas=3", "-n", plain_namespace)
    controlplane.kubectl("label", "deployment/llm-server", "team=search", "-n", plain_namespace)
    changed = controlplane.kubectl(
        "set", "image", "deployment/llm-server", "server=registry.example/llm-server:1.5",
        "-n", plain_namespace, check=False,
    )  # fmt: skip

    assert_denied(changed, "requests 9 nvidia.com/gpu")
    replica_set = controlplane.wait_for(
        lambda: next(
            (
                r
                for r in controlplane.list_json("replicasets", plain_namespace, "app=llm-server")
                if r["spec"]["replicas"] == 3
            ),
            None,
        ),
        what="the ReplicaSet scaled to 3",
    )
    event = controlplane.wait_for_event(
        plain_namespace, replica_set["metadata"]["name"], "FailedCreate"
    )
    assert "requests 9 nvidia.com/gpu" in event["message"], "the third pod is refused"


@pytest.fixture
def pytorch_jobs(controlplane: ControlPlane) -> Iterator[None]:
    with custom_kind(controlplane, crd("kubeflow.org", "PyTorchJob", "v1")):
        yield


def test_a_pytorch_job_with_a_bad_worker_template_fails_at_apply(
    controlplane: ControlPlane, opted_in: str, pytorch_jobs: None
) -> None:
    worker = training_template({"nvidia.com/gpu": 9}, **TRAINING)

    result = controlplane.apply(pytorch_job(worker), namespace=opted_in, check=False)

    assert_denied(
        result,
        f"PyTorchJob '{opted_in}/bert' template (spec.pytorchReplicaSpecs.Worker.template):",
        TOO_MANY,
    )
    assert "Master" not in result.stderr


def test_a_valid_pytorch_job_is_accepted(
    controlplane: ControlPlane, opted_in: str, pytorch_jobs: None
) -> None:
    worker = training_template({"nvidia.com/gpu": 8}, **TRAINING)

    controlplane.apply(pytorch_job(worker), namespace=opted_in)

    assert controlplane.exists("pytorchjob", "bert", opted_in)


def test_a_job_set_with_a_bad_replicated_job_fails_at_apply(
    controlplane: ControlPlane, opted_in: str
) -> None:
    good = training_template({"nvidia.com/gpu": 8}, **TRAINING)
    bad = training_template({"nvidia.com/gpu": 9}, **TRAINING)
    job_set = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "llama"},
        "spec": {"replicatedJobs": [
            {"name": "leader", "template": {"spec": {"template": good}}},
            {"name": "workers", "template": {"spec": {"template": bad}}},
        ]},
    }  # fmt: skip

    with custom_kind(controlplane, crd("jobset.x-k8s.io", "JobSet", "v1alpha2")):
        result = controlplane.apply(json.dumps(job_set), namespace=opted_in, check=False)

    assert_denied(
        result,
        f"JobSet '{opted_in}/llama' template (spec.replicatedJobs[1].template.spec.template):",
        TOO_MANY,
    )
    assert "replicatedJobs[0]" not in result.stderr


def long_running_template(gpus: int) -> dict[str, Any]:
    """A template of a long-running controller (restartPolicy Always, the default)."""
    template = training_template({"nvidia.com/gpu": gpus}, app="llm", **TRAINING)
    del template["spec"]["restartPolicy"]
    return template


def controller(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


SELECTOR = {"matchLabels": {"app": "llm"}}


def every_kind_with_a_bad_template() -> list[Any]:
    """(CRD or None, object, its template's field path) for each kind not covered above."""
    bad = long_running_template(9)
    bad_job = training_template({"nvidia.com/gpu": 9}, **TRAINING)
    ray_cluster = {
        "headGroupSpec": {"template": training_template({}, **TRAINING)},
        "workerGroupSpecs": [{"groupName": "gpu", "template": bad_job}],
    }
    return [
        pytest.param(
            None,
            controller("StatefulSet", "llm", serviceName="llm", selector=SELECTOR, template=bad),
            "spec.template",
            id="StatefulSet",
        ),
        pytest.param(
            None,
            controller("DaemonSet", "llm", selector=SELECTOR, template=bad),
            "spec.template",
            id="DaemonSet",
        ),
        pytest.param(
            None,
            controller("ReplicaSet", "llm", selector=SELECTOR, template=bad),
            "spec.template",
            id="ReplicaSet",
        ),
        pytest.param(
            crd("kubeflow.org", "TFJob", "v1"),
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "TFJob",
                "metadata": {"name": "llm"},
                "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2, "template": bad_job}}},
            },
            "spec.tfReplicaSpecs.Worker.template",
            id="TFJob",
        ),
        pytest.param(
            crd("kubeflow.org", "MPIJob", "v2beta1"),
            {
                "apiVersion": "kubeflow.org/v2beta1",
                "kind": "MPIJob",
                "metadata": {"name": "llm"},
                "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": bad_job}}},
            },
            "spec.mpiReplicaSpecs.Worker.template",
            id="MPIJob",
        ),
        pytest.param(
            crd("ray.io", "RayCluster", "v1"),
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": "llm"},
                "spec": ray_cluster,
            },
            "spec.workerGroupSpecs[0].template",
            id="RayCluster",
        ),
        pytest.param(
            crd("ray.io", "RayJob", "v1"),
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayJob",
                "metadata": {"name": "llm"},
                "spec": {"entrypoint": "python train.py", "rayClusterSpec": ray_cluster},
            },
            "spec.rayClusterSpec.workerGroupSpecs[0].template",
            id="RayJob",
        ),
        pytest.param(
            crd("leaderworkerset.x-k8s.io", "LeaderWorkerSet", "v1"),
            {
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "metadata": {"name": "llm"},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 4, "workerTemplate": bad}},
            },
            "spec.leaderWorkerTemplate.workerTemplate",
            id="LeaderWorkerSet",
        ),
    ]


@pytest.mark.parametrize(("definition", "workload", "path"), every_kind_with_a_bad_template())
def test_every_other_controller_and_ml_kind_with_a_bad_template_fails_at_apply(
    controlplane: ControlPlane,
    opted_in: str,
    definition: dict[str, Any] | None,
    workload: dict[str, Any],
    path: str,
) -> None:
    served = custom_kind(controlplane, definition) if definition else contextlib.nullcontext()
    with served:
        result = controlplane.apply(json.dumps(workload), namespace=opted_in, check=False)

    assert_denied(result, f"{workload['kind']} '{opted_in}/llm' template ({path}):", TOO_MANY)


def test_a_jobs_pods_carry_its_mutated_template_and_the_co_location_of_their_job_label(
    controlplane: ControlPlane, opted_in: str
) -> None:
    """The Job's template is mutated at its CREATE (mutate-workloads); kube-apiserver adds
    the Job's own labels to the template after mutating admission, so the co-location hint
    those labels key comes with each pod's CREATE, and nothing else does."""
    trainer = {
        "metadata": {"labels": {"gpu-admission.io/workload": "training"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "t", "image": "x:1"}]},
    }
    controlplane.apply(job(trainer), namespace=opted_in)
    [pod] = controlplane.wait_for(
        lambda: controlplane.list_json("pods", opted_in, "batch.kubernetes.io/job-name=train"),
        30,
        "the Job's pod",
    )
    template = controlplane.get_json("job", "train", opted_in)["spec"]["template"]

    spec, made = template["spec"], pod["spec"]
    assert template["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "train"
    assert "podAffinity" not in spec.get("affinity", {})
    assert made["affinity"]["nodeAffinity"] == spec["affinity"]["nodeAffinity"]
    assert made["affinity"]["podAffinity"]  # the co-location hint, at the pod's CREATE
    # kube-apiserver adds its not-ready and unreachable tolerations to every pod
    assert all(toleration in made["tolerations"] for toleration in spec["tolerations"])
    assert made["priorityClassName"] == spec["priorityClassName"] == "training-priority"
    assert made["containers"][0]["resources"] == spec["containers"][0]["resources"]
    # what the pod carries was injected at the Job's CREATE and at its own, and it says so
    injected = "gpu-admission.io/injected"
    assert (
        template["metadata"]["annotations"][injected] == "affinity,tolerations,priority,gpu-limits"
    )
    assert pod["metadata"]["annotations"][injected] == (
        "affinity,co-location,tolerations,priority,gpu-limits"
    )
