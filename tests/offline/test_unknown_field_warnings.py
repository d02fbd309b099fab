"""`check` and `explain` warn of each field Kubernetes does not know, as a warning of its
object (webhook.offline.evaluation over webhook.offline.manifest_fields): not a rule of the
engine, since the webhook never sees such a field."""

from __future__ import annotations

import copy
from typing import Any

from tests import builders
from webhook.engine import Engine
from webhook.offline.documents import Document
from webhook.offline.evaluation import Report, evaluate

CONSEQUENCE = (
    "kubectl's default --validate=strict refuses it; "
    "with --validate=false it is dropped and the object judged without it"
)
TYPO = f'unknown field "spec.containers[0].resource" (did you mean "resources"?): {CONSEQUENCE}'


def typo_pod() -> dict[str, Any]:
    """The issue's pod: `resource:` where `resources:` is meant, asking 4 GPUs."""
    obj = builders.pod("training")
    obj["spec"]["containers"][0]["resource"] = {"limits": {"nvidia.com/gpu": "4"}}
    return obj


def checked(engine: Engine, *objects: dict[str, Any]) -> Report:
    return evaluate(engine, [Document("m.yaml", i + 1, o) for i, o in enumerate(objects)])


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"labels": obj["metadata"]["labels"]}, "spec": obj["spec"]}


def test_the_issues_pod_is_warned_of_its_misspelt_resources(engine: Engine) -> None:
    report = checked(engine, typo_pod())

    [pod] = report.pods
    assert pod.warnings == (TYPO,)
    assert report.warnings == 1


def test_an_unknown_field_is_no_rule_of_the_engine(engine: Engine) -> None:
    [typo] = checked(engine, typo_pod()).pods
    [clean] = checked(engine, builders.pod("training")).pods

    assert typo.rules == clean.rules
    assert typo.allowed == clean.allowed


def test_a_pod_without_unknown_fields_is_not_warned(engine: Engine) -> None:
    assert checked(engine, builders.pod("training")).warnings == 0


def test_each_template_is_warned_of_its_own_and_the_first_of_those_outside_them(
    engine: Engine,
) -> None:
    job: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j", "namespace": "ml"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template_of(builders.pod("training"))},
                "Worker": {"replicas": 2, "template": template_of(typo_pod())},
            }
        },
    }
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "b", "namespace": "ml"},
        "spec": {"backofLimit": 2, "template": template_of(typo_pod())},
    }

    master, worker, only = checked(engine, job, batch).pods

    assert master.warnings == ()
    assert worker.warnings == (
        'unknown field "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resource" '
        f'(did you mean "resources"?): {CONSEQUENCE}',
    )
    assert only.warnings == (
        f'unknown field "spec.backofLimit" (did you mean "backoffLimit"?): {CONSEQUENCE}',
        'unknown field "spec.template.spec.containers[0].resource" '
        f'(did you mean "resources"?): {CONSEQUENCE}',
    )


def test_a_claim_object_is_warned_of_its_unknown_fields(engine: Engine) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": copy.deepcopy(builders.claim_spec(count=1)),
    }
    claim["spec"]["devices"]["requests"][0]["exactly"]["cuont"] = 4

    [judged] = checked(engine, claim).claim_objects

    assert judged.warnings[0] == (
        'unknown field "spec.devices.requests[0].exactly.cuont" '
        f'(did you mean "count"?): {CONSEQUENCE}'
    )
