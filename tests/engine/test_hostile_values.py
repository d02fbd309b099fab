"""Values a custom resource's template can carry that Kubernetes would refuse in a Pod:
every rule answers them with a short message or a malformed-object decision naming where,
never an exception (webhook/engine/rules/*)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import GPU_MODEL, container, pod, pod_create
from webhook.engine import Decision, Engine
from webhook.policy.load import default_policy_text, load_policy_text

MEGABYTE = 1_000_000


def validated(engine: Engine, obj: dict[str, Any]) -> Decision:
    return engine.validate(pod_create(obj))


@pytest.mark.parametrize("value", [["all"], {"a": 1}, 0, True])
def test_an_env_value_that_is_not_a_string_is_malformed_with_its_path(
    engine: Engine, value: Any
) -> None:
    entries = [{"name": "A", "value": "b"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": value}]
    decision = validated(engine, pod(containers=[container(), container("cuda", env=entries)]))
    assert (decision.allowed, decision.code) == (False, 400)
    assert decision.message == "malformed object: spec.containers[1].env[1].value: must be a string"


@pytest.mark.parametrize("workload", ["training", None], ids=["labelled", "unlabelled"])
@pytest.mark.parametrize(
    ("toleration", "path", "reason"),
    [
        ({"key": ["gpu-pool"], "operator": "Exists"}, "key", "must be a string"),
        ({"key": "gpu-pool", "value": {"a": 1}}, "value", "must be a string"),
        ({"key": "gpu-pool", "operator": ["Exists"]}, "operator", "must be a string"),
        ({"key": "gpu-pool", "operator": "Exists", "effect": 1}, "effect", "must be a string"),
        (
            {"key": "gpu-pool", "operator": "Exists", "tolerationSeconds": "60"},
            "tolerationSeconds",
            "must be an integer",
        ),
        (
            {"key": "gpu-pool", "operator": "Exists", "tolerationSeconds": True},
            "tolerationSeconds",
            "must be an integer",
        ),
    ],
    ids=["list-key", "dict-value", "list-operator", "int-effect", "string-seconds", "bool-seconds"],
)
def test_a_toleration_field_of_the_wrong_type_is_malformed_with_its_path(
    engine: Engine, workload: str | None, toleration: dict[str, Any], path: str, reason: str
) -> None:
    obj = pod(workload, tolerations=[toleration])
    for review in (engine.validate, engine.mutate):
        decision = review(pod_create(obj))
        assert (decision.allowed, decision.code) == (False, 400)
        assert decision.message == f"malformed object: spec.tolerations[0].{path}: {reason}"


def test_well_typed_tolerations_are_read(engine: Engine) -> None:
    tolerations = [
        {"key": "gpu-pool", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "gpu-pool", "operator": "Equal", "value": "training"},
        {"operator": "Exists"},
    ]
    decision = validated(engine, pod("training", tolerations=tolerations))
    assert decision.code != 400


def test_a_megabyte_of_visible_devices_is_quoted_in_a_few_words(engine: Engine) -> None:
    entry = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "0," * (MEGABYTE // 2)}
    decision = validated(engine, pod(containers=[container("cuda", env=[entry])]))
    assert not decision.allowed
    assert "sets NVIDIA_VISIBLE_DEVICES=0,0,0," in decision.message
    assert "... (1,000,000 characters)" in decision.message
    assert len(decision.message) < 400


@pytest.mark.parametrize(
    "obj",
    [
        pod("x" * MEGABYTE),
        pod("inference", labels={GPU_MODEL: "x" * MEGABYTE}),
        pod("inference", containers=[container(limits={"nvidia.com/gpu": "x" * MEGABYTE})]),
        pod("inference", containers=[container(limits={"nvidia.com/gpu": "-" + "1" * MEGABYTE})]),
        pod("inference", containers=[container(requests={"nvidia.com/gpu": "1" * MEGABYTE})]),
        pod("inference", containers=[container(limits={"nvidia.com/gpu": "1"}, requests={"nvidia.com/gpu": "2" * MEGABYTE})]),
        pod("inference", containers=[container(gpus=1)], priorityClassName="p" * MEGABYTE),
        pod(containers=[container(limits={"nvidia.com/mig-" + "x" * MEGABYTE: "1"})]),
        pod("inference", containers=[container(limits={"nvidia.com/mig-" + "x" * MEGABYTE: "1"})]),
    ],
    ids=[
        "class-label", "model-label", "quantity", "negative-quantity", "request-without-limit",
        "unequal-request", "priority-class", "mig-resource-name", "mig-resource-name-of-a-class",
    ],
)  # fmt: skip
def test_a_megabyte_value_makes_a_short_denial(engine: Engine, obj: dict[str, Any]) -> None:
    decision = validated(engine, obj)
    assert not decision.allowed
    assert "characters)" in decision.message
    assert len(decision.message) < 2_000


def test_a_thousand_resources_that_are_not_mig_profiles_make_ten_reasons_and_a_count(
    engine: Engine,
) -> None:
    limits = {f"nvidia.com/mig-{n}": "1" for n in range(1_000)}
    decision = validated(engine, pod("inference", containers=[container(limits=limits)]))
    mig = [v for v in decision.violations if v.rule == "mig-profile"]
    assert len(mig) == 11
    assert mig[-1].message == "990 more GPU resources were not judged"


PYTORCH = """
workloadKinds:
  - {group: kubeflow.org, kind: PyTorchJob, resource: pytorchjobs,
     templatePaths: [/spec/pytorchReplicaSpecs/*/template]}
"""


def test_a_custom_resource_of_two_thousand_bad_templates_names_ten_and_counts_the_rest() -> None:
    engine = Engine(load_policy_text(default_policy_text() + PYTORCH, "with PyTorchJob"))
    template = {
        "metadata": {"labels": {"gpu-admission.io/workload": "inference"}},
        "spec": {"containers": [container(gpus=99)]},
    }
    specs = {f"{n}" + "k" * 1_000: {"template": template} for n in range(2_000)}
    obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    request = pod_create(obj, group="kubeflow.org", kind="PyTorchJob", resource="pytorchjobs")
    decision = engine.validate(request)
    assert len(decision.violations) == 2_000
    assert decision.message.endswith("; and 1,990 more")
    assert "template (spec.pytorchReplicaSpecs.0kkk" in decision.message
    assert len(decision.message) < 10 * 600


def test_a_megabyte_container_name_is_quoted_in_a_few_words(engine: Engine) -> None:
    name = "c" * MEGABYTE
    entry = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
    decision = validated(engine, pod(containers=[container(name, env=[entry])]))
    assert f"container {'c' * 64!r}... (1,000,000 characters) sets" in decision.message
    assert decision.message.endswith("(only 'void' or 'none' are accepted)")


def test_a_megabyte_node_name_is_quoted_in_a_few_words(engine: Engine) -> None:
    decision = validated(engine, pod(containers=[container()], nodeName="n" * MEGABYTE))
    assert not decision.allowed
    assert f"names node {'n' * 64!r}... (1,000,000 characters) in spec.nodeName" in decision.message


@pytest.mark.parametrize("metadata", [None, {}], ids=["null", "empty"])
def test_a_pod_without_metadata_in_a_review_without_namespace_is_judged(
    engine: Engine, metadata: Any
) -> None:
    """Found by the fuzzer: `metadata: null` made the namespace lookup raise (a code 500)."""
    request = pod_create({"metadata": metadata, "spec": {"containers": []}}, namespace="")
    for decision in (engine.mutate(request), engine.validate(request)):
        assert decision.code != 500


def test_an_old_debug_container_named_by_a_list_is_not_taken_for_a_name(engine: Engine) -> None:
    """A name of the old object that is not a string once made /mutate raise `unhashable`."""
    new = pod(containers=[container()], ephemeralContainers=[container("debug")])
    old = pod(containers=[container()], ephemeralContainers=[{"name": ["debug"]}])
    request = pod_create(new, operation="UPDATE", subresource="ephemeralcontainers", old_object=old)
    decision = engine.mutate(request)
    assert decision.allowed
    assert [op["path"] for op in decision.patch] == ["/spec/ephemeralContainers/0/env"]
