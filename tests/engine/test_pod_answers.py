"""Answers kept per pod template (webhook/engine/pod_answers.py).

The replicas of a workload are judged and mutated by looking their answer up; it must
be the answer working the pod out afresh gives, and nothing a caller does with it may
change what the next replica gets.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch

from tests.builders import (
    claim_objects,
    claim_spec,
    claim_template,
    claiming_pod,
    container,
    dra_engine,
    pod,
    pod_create,
)
from webhook.engine import Decision, Engine
from webhook.engine.dra.pod_claims import NO_CLAIMS
from webhook.engine.inventory import Inventory, PriorityClassFacts
from webhook.engine.kept import KeptAnswers
from webhook.engine.pod import read_pod
from webhook.engine.pod_answers import pod_key
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.load import default_policy_text

POLICY = load_default_policy()


def replica(name: str, **spec: Any) -> dict[str, Any]:
    """An inference pod of one template, under its own name."""
    spec.setdefault("containers", [container(gpus=1)])
    obj = pod("inference", name=name, **spec)
    obj["metadata"]["uid"] = f"uid-{name}"
    return obj


def reviewed(engine: Engine, obj: dict[str, Any]) -> tuple[Decision, Decision]:
    """The mutation of `obj` and the validation of the mutated pod."""
    mutated = engine.mutate(pod_create(obj))
    patched = jsonpatch.apply_patch(obj, list(mutated.patch))
    return mutated, engine.validate(pod_create(patched, name=obj["metadata"]["name"]))


def test_every_replica_gets_what_working_it_out_afresh_gives() -> None:
    engine = Engine(POLICY)
    for index in range(3):
        obj = replica(f"llm-{index}")
        assert reviewed(engine, obj) == reviewed(Engine(POLICY), obj)
    assert len(engine.kept_findings) == 1
    assert len(engine.kept_patches) == 1


def test_a_denial_names_each_replica_not_the_first() -> None:
    engine = Engine(POLICY)
    first, second = (replica(n, nodeName="gpu-1") for n in ("first", "second"))
    assert "first" in reviewed(engine, first)[1].message
    assert "second" in reviewed(engine, second)[1].message


def test_pods_that_differ_in_their_spec_annotations_or_labels_are_answered_apart() -> None:
    engine = Engine(POLICY)
    base = replica("p")
    annotated = copy.deepcopy(base)
    annotated["metadata"]["annotations"] = {"cdi.k8s.io/gpus": "nvidia.com/gpu=all"}
    relabelled = copy.deepcopy(base)
    relabelled["metadata"]["labels"]["gpu-admission.io/workload"] = "training"
    more_gpus = replica("p", containers=[container(gpus=9)])
    for obj in (base, annotated, relabelled, more_gpus):
        assert reviewed(engine, obj) == reviewed(Engine(POLICY), obj)
    answers = {repr(reviewed(engine, obj)) for obj in (base, annotated, relabelled, more_gpus)}
    assert len(answers) == 4


def test_a_caller_changing_its_patch_changes_nothing_kept() -> None:
    engine = Engine(POLICY)
    first = engine.mutate(pod_create(replica("a")))
    first.patch[0]["value"] = "changed"
    assert engine.mutate(pod_create(replica("b"))) == Engine(POLICY).mutate(
        pod_create(replica("b"))
    )


def test_a_change_of_the_cluster_starts_the_answers_over() -> None:
    engine = Engine(POLICY)
    wanted = POLICY.classes["inference"].priority_class
    before = Inventory(nodes=None, priority_classes={})
    after = Inventory(
        nodes=None,
        priority_classes={wanted.name: PriorityClassFacts(wanted.name, 7, None)},
    )
    obj = replica("p")
    for inventory in (before, after):
        assert engine.mutate(pod_create(obj), inventory) == Engine(POLICY).mutate(
            pod_create(obj), inventory
        )
    assert {"op": "add", "path": "/spec/priority", "value": 7} in engine.mutate(
        pod_create(obj), after
    ).patch


def test_pods_naming_claims_are_kept_with_their_objects_as_read() -> None:
    engine = dra_engine()
    obj = claiming_pod(gpu="one-gpu")
    one = claim_objects(claim_template("one-gpu"))
    two = claim_objects(claim_template("one-gpu", claim_spec(count=2)))
    for claims in (one, two, NO_CLAIMS, one):
        assert engine.mutate(pod_create(obj), claims=claims) == dra_engine().mutate(
            pod_create(obj), claims=claims
        )
        assert engine.validate(pod_create(obj), claims=claims) == dra_engine().validate(
            pod_create(obj), claims=claims
        )
    assert len(engine.kept_findings) == 3
    view = read_pod(obj, engine.policy)
    assert len({pod_key(view, claims) for claims in (one, two, NO_CLAIMS)}) == 3


def test_no_more_answers_are_kept_than_the_bound() -> None:
    engine = Engine(POLICY)
    engine.kept_findings = KeptAnswers(2)
    for index in range(5):
        obj = replica("p", containers=[container(gpus=1, env=[{"name": "N", "value": str(index)}])])
        assert reviewed(engine, obj) == reviewed(Engine(POLICY), obj)
        assert len(engine.kept_findings) <= 2


def test_pods_over_the_key_bound_or_beyond_json_are_not_kept() -> None:
    big = replica("p", containers=[container(gpus=1, env=[{"name": "N", "value": "v" * 20_000}])])
    odd = replica("p", containers=[container(gpus=1, env=[{"name": "N", "value": 2**70}])])
    for obj in (big, odd):
        assert pod_key(read_pod(obj, POLICY)) is None


EXEMPTING = load_policy_text(
    default_policy_text()
    + """
exemptions:
  - namespaces: [gpu-burn-in]
    reason: node acceptance tests by the platform team
""",
    "exempting.yaml",
)


def test_a_replica_in_an_exempt_namespace_is_exempt_though_its_template_was_judged() -> None:
    engine = Engine(EXEMPTING)
    obj = replica("p", nodeName="gpu-1")
    judged = engine.validate(pod_create(obj))
    exempted = engine.validate(pod_create(obj, namespace="gpu-burn-in"))
    assert not judged.allowed
    assert exempted == Engine(EXEMPTING).validate(pod_create(obj, namespace="gpu-burn-in"))
    assert exempted.allowed
    assert engine.validate(pod_create(obj)) == judged


def test_a_replica_of_a_malformed_name_is_refused_though_its_template_was_judged() -> None:
    engine = Engine(POLICY)
    obj = replica("p")
    engine.validate(pod_create(obj))
    engine.mutate(pod_create(obj))
    odd = copy.deepcopy(obj)
    odd["metadata"]["name"] = 7
    for decide in (engine.validate, engine.mutate):
        assert decide(pod_create(odd)).code == 400
