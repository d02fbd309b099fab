"""The offline commands say the webhook's exact words: each denial and warning `check`,
`explain` and `policy test` show is the text kube-apiserver would print for the same
object, a Pod, a Deployment, a CronJob or any other workload kind."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from webhook.engine import AdmissionRequest, Engine
from webhook.engine.decision import Decision
from webhook.offline.documents import Document
from webhook.offline.evaluation import KUBECTL_NAMESPACE, PodEvaluation, evaluate
from webhook.offline.prose import explain
from webhook.policy.load import default_policy_text, load_policy_text

GPU = {"limits": {"nvidia.com/gpu": 1}}
NINE = {"limits": {"nvidia.com/gpu": 9}}


def pod_spec(resources: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels or {}},
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "eval", "image": "registry.example/eval:1", "resources": resources}],
        },
    }  # fmt: skip


def metadata(name: str, namespace: str | None) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {})}


def a_pod(template: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], **metadata("trainer", namespace)}, "spec": template["spec"]}  # fmt: skip


def a_deployment(template: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata("llm-server", namespace), "spec": {"selector": {}, "template": template}}  # fmt: skip


def a_cronjob(template: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    spec = {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata("nightly-eval", namespace), "spec": spec}  # fmt: skip


def a_job(template: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata("resnet-train", namespace), "spec": {"template": template}}  # fmt: skip


def a_statefulset(template: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata("db", namespace), "spec": {"selector": {}, "serviceName": "db", "template": template}}  # fmt: skip


def a_pytorchjob(template: dict[str, Any], namespace: str | None) -> dict[str, Any]:
    replicas = {"Master": {"replicas": 1, "template": template}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata("bert", namespace), "spec": {"pytorchReplicaSpecs": replicas}}  # fmt: skip


WORKLOADS = {
    "Deployment": (a_deployment, "apps", "deployments"),
    "CronJob": (a_cronjob, "batch", "cronjobs"),
    "Job": (a_job, "batch", "jobs"),
    "StatefulSet": (a_statefulset, "apps", "statefulsets"),
    "PyTorchJob": (a_pytorchjob, "kubeflow.org", "pytorchjobs"),
}


def webhook_says(engine: Engine, obj: dict[str, Any], namespace: str) -> Decision:
    """What the webhooks answer kube-apiserver for the CREATE of `obj` in `namespace`: a
    Pod mutated then validated, a workload validated (a template mutated at CREATE
    is judged as mutated, so validation alone says the same)."""
    name = obj["metadata"]["name"]
    if obj["kind"] == "Pod":
        request = AdmissionRequest.pod_create("u", namespace, name, copy.deepcopy(obj))
        mutation = engine.mutate(request)
        mutated = jsonpatch.apply_patch(request.object, list(mutation.patch))
        decision = engine.validate(AdmissionRequest.pod_create("u", namespace, name, mutated))
        warnings = tuple(dict.fromkeys(mutation.warnings + decision.warnings))
        return Decision(decision.allowed, decision.code, decision.message, warnings=warnings)
    _, group, resource = WORKLOADS[obj["kind"]]
    version = obj["apiVersion"].rpartition("/")[2]
    request = AdmissionRequest(
        "u", "CREATE", group, version, obj["kind"], resource, "", namespace, name, obj
    )
    return engine.validate(request)


def check_says(engine: Engine, obj: dict[str, Any]) -> PodEvaluation:
    [evaluation] = evaluate(engine, [Document("manifest.yaml", 1, obj)]).pods
    return evaluation


@pytest.fixture(scope="module")
def warn_engine() -> Engine:
    """The default policy with gpu-count in warn mode."""
    text = default_policy_text() + "\nenforcement:\n  rules:\n    gpu-count: warn\n"
    return Engine(load_policy_text(text, "warn.yaml"))


class TestDenials:
    def test_a_pod_is_denied_in_the_webhooks_words(self, engine: Engine) -> None:
        obj = a_pod(pod_spec(GPU), "ml-train")
        said = check_says(engine, obj)

        assert not said.allowed
        assert said.message == webhook_says(engine, obj, "ml-train").message
        assert said.message.startswith("gpu-admission denied pod 'ml-train/trainer': ")

    @pytest.mark.parametrize("kind", list(WORKLOADS))
    def test_a_workload_is_denied_in_the_webhooks_words(self, engine: Engine, kind: str) -> None:
        obj = WORKLOADS[kind][0](pod_spec(GPU), "ml-train")
        said = check_says(engine, obj)

        assert not said.allowed
        assert said.message == webhook_says(engine, obj, "ml-train").message

    def test_a_cronjob_names_its_kind_and_its_template_path(self, engine: Engine) -> None:
        said = check_says(engine, a_cronjob(pod_spec(GPU), "ml-train"))

        assert said.message == (
            "gpu-admission denied CronJob 'ml-train/nightly-eval' template "
            "(spec.jobTemplate.spec.template): pod requests nvidia.com/gpu but has no label "
            "gpu-admission.io/workload; set it to one of: inference, training"
        )

    def test_a_deployment_names_its_kind_and_its_template_path(self, engine: Engine) -> None:
        said = check_says(engine, a_deployment(pod_spec(NINE, {"gpu-admission.io/workload": "training"}), "ml"))  # fmt: skip

        assert said.message.startswith(
            "gpu-admission denied Deployment 'ml/llm-server' template (spec.template): "
        )
        assert said.message == webhook_says(engine, a_deployment(pod_spec(NINE, {"gpu-admission.io/workload": "training"}), "ml"), "ml").message  # fmt: skip

    @pytest.mark.parametrize("kind", ["Pod", *WORKLOADS])
    def test_a_manifest_without_a_namespace_is_worded_as_kubectl_would_send_it(
        self, engine: Engine, kind: str
    ) -> None:
        build = a_pod if kind == "Pod" else WORKLOADS[kind][0]
        said = check_says(engine, build(pod_spec(GPU), None))

        assert KUBECTL_NAMESPACE == "default"
        assert said.message == webhook_says(engine, build(pod_spec(GPU), None), "default").message
        assert "'default/" in said.message

    def test_a_workload_refused_for_two_templates_is_refused_in_one_message(
        self, engine: Engine
    ) -> None:
        obj = a_pytorchjob(pod_spec(GPU), "ml")
        obj["spec"]["pytorchReplicaSpecs"]["Worker"] = {"replicas": 2, "template": pod_spec(NINE, {"gpu-admission.io/workload": "training"})}  # fmt: skip
        obj["spec"]["pytorchReplicaSpecs"]["Launcher"] = {"template": pod_spec({})}
        master, worker, launcher = evaluate(engine, [Document("m.yaml", 1, obj)]).pods
        said = webhook_says(engine, obj, "ml").message

        assert master.message == worker.message == said
        assert "template (spec.pytorchReplicaSpecs.Master.template): " in said
        assert "; template (spec.pytorchReplicaSpecs.Worker.template): " in said
        assert launcher.allowed and launcher.message == ""

    def test_explain_says_the_same_denial_when_it_has_no_rules_to_list(
        self, engine: Engine
    ) -> None:
        obj = a_cronjob(pod_spec(GPU), "ml-train")
        said = check_says(engine, obj)

        assert "would be denied:" in explain(said)
        assert said.message == webhook_says(engine, obj, "ml-train").message


class TestWarnings:
    @pytest.mark.parametrize("kind", ["Pod", *WORKLOADS])
    def test_a_warning_is_the_webhooks_warning(self, warn_engine: Engine, kind: str) -> None:
        build = a_pod if kind == "Pod" else WORKLOADS[kind][0]
        obj = build(pod_spec(NINE, {"gpu-admission.io/workload": "training"}), "ml")
        said = check_says(warn_engine, obj)

        assert said.allowed
        assert said.warnings
        assert said.warnings == webhook_says(warn_engine, obj, "ml").warnings
        assert all(w.startswith("gpu-admission: gpu-count: ") for w in said.warnings)
