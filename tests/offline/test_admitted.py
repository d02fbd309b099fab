"""`check --admitted`: the objects as admitted (webhook/offline/admitted.py)."""

from __future__ import annotations

from typing import Any

from tests.builders import container, pod, pod_create
from webhook.engine import Engine
from webhook.offline.admitted import Admitted, admitted
from webhook.offline.documents import Document
from webhook.offline.evaluation import evaluate
from webhook.policy import load_default_policy

ENGINE = Engine(load_default_policy())


def job(workload: str) -> dict[str, Any]:
    template = pod(workload, restartPolicy="Never")
    del template["apiVersion"], template["kind"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": template},
    }


def deployment(workload: str) -> dict[str, Any]:
    template = pod(workload)
    del template["apiVersion"], template["kind"]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serve", "namespace": "ml"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template},
    }


def admitted_of(*objects: dict[str, Any]) -> Admitted:
    documents = [Document("m.yaml", index + 1, obj) for index, obj in enumerate(objects)]
    return admitted(ENGINE, documents, evaluate(ENGINE, documents))


def test_a_pod_is_printed_as_mutated_and_the_mutation_of_it_is_then_empty() -> None:
    found = admitted_of(pod("inference"))

    (printed,) = found.objects
    assert printed["spec"]["priorityClassName"] == "inference-priority"
    assert printed["spec"]["affinity"]["nodeAffinity"]
    assert ENGINE.mutate(pod_create(printed)).patch == ()
    assert found.denials == []


def test_a_job_has_its_template_mutated_and_a_deployment_is_left_as_written() -> None:
    printed_job, printed_deployment = admitted_of(job("training"), deployment("inference")).objects

    assert printed_job["spec"]["template"]["spec"]["priorityClassName"] == "training-priority"
    assert printed_deployment == deployment("inference")


def test_a_refused_object_is_left_out_and_its_denial_says_where_it_was_read() -> None:
    greedy = pod("inference", containers=[container(gpus=99)])
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}

    found = admitted_of(greedy, config)

    assert found.objects == [config]
    (denial,) = found.denials
    assert denial.startswith("m.yaml:1: gpu-admission denied pod")
    assert "requests 99 nvidia.com/gpu" in denial
