"""Pod templates mutated at their workload's CREATE (webhook/engine/template_mutation.py,
the `mutate-workloads` handler): a queue that charges and places a workload by its
templates (Kueue) sees the pods that will run, and each pod made from a mutated template
gets an empty patch at its own CREATE (the job labels that key the co-location hint are
those the template carries; kube-apiserver adds a Job's own after mutating admission,
tests/e2e/test_workloads.py)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from hypothesis import given

from tests.builders import container, pod_create
from tests.engine.test_properties import FAST, OVERFLOW_ENGINE, POLICIES, Pod, pods
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.mutate import INJECTED_ANNOTATION
from webhook.engine.templates import pod_from_template, pod_templates
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text

WORKLOAD = "gpu-admission.io/workload"
ENGINE = Engine(load_default_policy())
TRAINING_POOL = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": ["training"]}]}
    ]
}


def template(workload: str | None = "training", **spec: Any) -> dict[str, Any]:
    labels = {WORKLOAD: workload} if workload else {}
    return {
        "metadata": {"labels": {"app": "trainer", **labels}},
        "spec": {"restartPolicy": "Never", "containers": [container()], **spec},
    }


def job(tmpl: dict[str, Any], parallelism: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"parallelism": parallelism, "template": tmpl},
    }


def created(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> AdmissionRequest:
    group, _, version = obj["apiVersion"].rpartition("/")
    return pod_create(
        obj,
        operation=operation,
        group=group,
        version=version,
        kind=obj["kind"],
        resource=obj["kind"].lower() + "s",
        name=obj["metadata"]["name"],
        old_object=old,
    )


def mutated(obj: dict[str, Any], engine: Engine = ENGINE) -> dict[str, Any]:
    decision = engine.mutate(created(obj))
    assert decision.allowed, decision.message
    result: dict[str, Any] = jsonpatch.apply_patch(obj, list(decision.patch))
    return result


def pod_patch(tmpl: dict[str, Any], engine: Engine = ENGINE) -> Decision:
    """The mutation of a pod its controller makes of `tmpl`, at the pod's CREATE."""
    pod = pod_from_template(tmpl)
    pod["metadata"] = {**pod["metadata"], "name": "train-0", "namespace": "ml"}
    return engine.mutate(pod_create(pod))


def test_a_training_job_without_gpus_is_charged_the_class_default_in_its_template() -> None:
    spec = mutated(job(template()))["spec"]["template"]["spec"]

    assert spec["containers"][0]["resources"] == {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1"},
    }


def test_the_template_gets_the_pools_affinity_tolerations_and_priority_class_by_name() -> None:
    spec = mutated(job(template()))["spec"]["template"]["spec"]

    required = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == TRAINING_POOL
    assert spec["tolerations"] == [
        {"key": "gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}
    ]
    assert spec["priorityClassName"] == "training-priority"
    assert "priority" not in spec and "preemptionPolicy" not in spec


def test_gpu_limits_alone_get_equal_requests_in_the_template() -> None:
    tmpl = template(containers=[container(limits={"nvidia.com/gpu": "2"})])

    resources = mutated(job(tmpl))["spec"]["template"]["spec"]["containers"][0]["resources"]

    assert resources == {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}


def test_a_pod_made_from_a_mutated_template_gets_an_empty_patch() -> None:
    tmpl = mutated(job(template()))["spec"]["template"]

    decision = pod_patch(tmpl)

    assert decision.allowed and decision.patch == ()


def test_a_pod_given_the_co_location_hint_of_its_jobs_label_is_annotated_with_all_we_injected() -> (
    None
):
    tmpl = mutated(job(template()))["spec"]["template"]
    tmpl["metadata"]["labels"]["batch.kubernetes.io/job-name"] = "train"  # added after us
    pod = pod_from_template(tmpl)
    pod["metadata"] = {**pod["metadata"], "name": "train-0", "namespace": "ml"}

    result = jsonpatch.apply_patch(pod, list(ENGINE.mutate(pod_create(pod)).patch))

    assert result["metadata"]["annotations"][INJECTED_ANNOTATION] == (
        "affinity,co-location,tolerations,priority,gpu-limits"
    )


def test_names_recorded_by_another_revision_or_by_hand_are_not_repeated() -> None:
    pod = pod_from_template(template())
    pod["metadata"] = {**pod["metadata"], "name": "train-0", "namespace": "ml"}
    pod["metadata"]["annotations"] = {INJECTED_ANNOTATION: "gpu-isolation,co-location"}
    written = {"affinity,tolerations,priority,gpu-limits"}
    for revision in (None, "0123456789ab"):
        if revision:
            pod["metadata"]["annotations"]["gpu-admission.io/policy-revision"] = revision

        result = jsonpatch.apply_patch(pod, list(ENGINE.mutate(pod_create(pod)).patch))

        assert {result["metadata"]["annotations"][INJECTED_ANNOTATION]} == written


def test_each_template_of_a_workload_is_mutated_at_its_own_path() -> None:
    pytorch = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 3, "template": template()},
            }
        },
    }

    replicas = mutated(pytorch)["spec"]["pytorchReplicaSpecs"]

    for role in ("Master", "Worker"):
        assert replicas[role]["template"]["spec"]["priorityClassName"] == "training-priority"
        assert pod_patch(replicas[role]["template"]).patch == ()


def test_a_cron_jobs_job_template_is_mutated() -> None:
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ml"},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template()}}},
    }

    spec = mutated(cron)["spec"]["jobTemplate"]["spec"]["template"]["spec"]

    assert spec["tolerations"][0]["value"] == "training"


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"])
def test_long_running_templates_are_left_to_their_pods_by_default(kind: str) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "chat", "namespace": "ml"},
        "spec": {"template": template("inference")},
    }

    assert ENGINE.mutate(created(deployment)).patch == ()


def test_the_policy_names_the_kinds_whose_templates_are_mutated() -> None:
    text = default_policy_text() + "\nmutateTemplates: [Deployment]\n"
    engine = Engine(load_policy_text(text, "policy.yaml"))
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "namespace": "ml"},
        "spec": {"template": template("inference")},
    }

    assert engine.mutate(created(deployment)).patch != ()
    assert engine.mutate(created(job(template()))).patch == ()


def test_a_template_of_no_class_is_left_as_it_is() -> None:
    assert ENGINE.mutate(created(job(template(workload=None)))).patch == ()


def test_an_update_that_leaves_every_templates_class_is_not_mutated() -> None:
    before = job(template())
    suspended = copy.deepcopy(before)
    suspended["spec"]["suspend"] = True
    suspended["spec"]["template"]["spec"]["nodeSelector"] = {"flavor": "a"}

    assert ENGINE.mutate(created(suspended, "UPDATE", before)).patch == ()


def cron_job(tmpl: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "ml"},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": tmpl}}},
    }


def test_a_template_given_a_class_by_an_update_is_mutated_as_at_create() -> None:
    before = cron_job(template(workload=None))
    classed = cron_job(template("training"))

    decision = ENGINE.mutate(created(classed, "UPDATE", before))

    spec = jsonpatch.apply_patch(classed, list(decision.patch))["spec"]["jobTemplate"]["spec"]
    assert spec["template"]["spec"]["priorityClassName"] == "training-priority"
    assert spec["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]


def test_a_template_moved_to_another_class_by_an_update_is_mutated_for_it() -> None:
    before = mutated(cron_job(template("training")))
    moved = copy.deepcopy(before)
    moved["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"][WORKLOAD] = "inference"

    decision = ENGINE.mutate(created(moved, "UPDATE", before))

    assert decision.patch != ()


def test_a_suspended_job_given_a_class_by_an_update_is_refused_for_what_it_cannot_take() -> None:
    before = job(template(workload=None))
    before["spec"]["suspend"] = True
    classed = copy.deepcopy(before)
    classed["spec"]["template"]["metadata"]["labels"][WORKLOAD] = "inference"

    decision = ENGINE.mutate(created(classed, "UPDATE", before))

    assert not decision.allowed
    assert "spec.template" in decision.message
    assert "create the workload again" in decision.message


def test_a_malformed_template_is_refused_with_its_field() -> None:
    broken = job({"metadata": {"labels": {WORKLOAD: "training"}}, "spec": {"containers": "x"}})

    decision = ENGINE.mutate(created(broken))

    assert not decision.allowed
    assert "spec.template.spec.containers" in decision.message


def test_the_mutated_template_is_admitted_by_validation() -> None:
    mutated_job = mutated(job(template()))

    decision = ENGINE.validate(created(mutated_job))

    assert decision.allowed, decision.message


@POLICIES
@FAST
@given(pod=pods())
def test_every_pod_made_from_a_mutated_template_gets_an_empty_patch(
    engine: Engine, pod: Pod
) -> None:
    tmpl = {key: pod[key] for key in ("metadata", "spec") if key in pod}
    before = copy.deepcopy(tmpl)
    decision = engine.mutate(created(job(tmpl)))
    assert tmpl == before
    if not decision.allowed:
        return  # a template the pod webhook would refuse to read as well
    mutated_template = jsonpatch.apply_patch(job(tmpl), list(decision.patch))["spec"]["template"]

    again = pod_patch(mutated_template, engine)

    assert again.patch == (), f"the pod was patched again: {again.patch}"


def test_the_overflow_policy_mutates_templates_with_its_preferred_pools() -> None:
    spec = mutated(job(template("inference")), OVERFLOW_ENGINE)["spec"]["template"]["spec"]

    assert "preferredDuringSchedulingIgnoredDuringExecution" in spec["affinity"]["nodeAffinity"]


def holding(paths: tuple[str, ...], tmpl: dict[str, Any]) -> dict[str, Any]:
    """An object with `tmpl` at each of `paths`, a `*` standing for a list of one."""
    obj: dict[str, Any] = {}
    for path in paths:
        here: Any = obj
        tokens = path.split("/")[1:]
        for token, after in zip(tokens, [*tokens[1:], None], strict=True):
            if token == "*":
                here = here[0]
                continue
            fresh: Any = copy.deepcopy(tmpl) if after is None else [{}] if after == "*" else {}
            here = here.setdefault(token, fresh)
    return obj


@pytest.mark.parametrize("kind", load_default_policy().workload_kinds, ids=lambda k: k.kind)
def test_every_template_of_each_ml_kind_is_mutated_and_its_pods_get_an_empty_patch(
    kind: Any,
) -> None:
    obj = holding(kind.paths, template())
    obj |= {
        "apiVersion": f"{kind.group}/v1",
        "kind": kind.kind,
        "metadata": {"name": "train", "namespace": "ml"},
    }

    after = mutated(obj)

    templates = pod_templates(after, kind)
    assert len(templates) == len(kind.paths)
    for _, mutated_template in templates:
        assert mutated_template["spec"]["priorityClassName"] == "training-priority"
        assert pod_patch(mutated_template).patch == ()
