"""The policy's workload kinds: custom kinds whose pod templates are judged."""

from __future__ import annotations

import pytest

from webhook.errors import PolicyError
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.compiled import TemplateKind
from webhook.policy.load import default_policy_text

CUSTOM = """
workloadKinds:
  - group: example.com
    kind: Trainer
    resource: trainers
    templatePaths: [/spec/replicas/*/template]
"""


def with_kinds(section: str) -> str:
    return default_policy_text() + section


def test_by_default_the_common_ml_kinds_are_judged() -> None:
    kinds = {(k.group, k.kind): k for k in load_default_policy().workload_kinds}

    assert sorted(kinds) == [
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "MPIJob"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
        ("ray.io", "RayCluster"),
        ("ray.io", "RayJob"),
    ]
    assert kinds["kubeflow.org", "PyTorchJob"] == TemplateKind(
        "kubeflow.org", "PyTorchJob", ("/spec/pytorchReplicaSpecs/*/template",), "pytorchjobs"
    )
    assert kinds["ray.io", "RayJob"].paths == (
        "/spec/rayClusterSpec/headGroupSpec/template",
        "/spec/rayClusterSpec/workerGroupSpecs/*/template",
    )


def test_a_policy_listing_its_own_kinds_replaces_the_defaults() -> None:
    policy = load_policy_text(with_kinds(CUSTOM), "custom.yaml")

    assert policy.workload_kinds == (
        TemplateKind("example.com", "Trainer", ("/spec/replicas/*/template",), "trainers"),
    )


def test_an_empty_list_judges_only_the_built_in_controllers() -> None:
    assert load_policy_text(with_kinds("workloadKinds: []\n"), "p.yaml").workload_kinds == ()


@pytest.mark.parametrize(
    ("section", "path", "reason"),
    [
        (CUSTOM.replace("example.com", "apps"), "workloadKinds[0].group", "built in"),
        (CUSTOM + CUSTOM.split("\n", 2)[2], "workloadKinds[1]", "listed twice"),
        (
            CUSTOM.replace("/spec/replicas/*/template", "spec.template"),
            "workloadKinds[0].templatePaths",
            "must be a JSON pointer",
        ),
        (
            CUSTOM.replace("/spec/replicas/*/template", "/spec/worker-groups/*"),
            "workloadKinds[0].templatePaths",
            "must be a JSON pointer",
        ),
        (CUSTOM.replace("resource: trainers", "resource: Trainers"), "workloadKinds[0].resource", ""),
    ],
    ids=["built-in-group", "twice", "dotted-path", "not-a-cel-field", "resource-case"],
)  # fmt: skip
def test_a_wrong_workload_kind_names_its_path(section: str, path: str, reason: str) -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy_text(with_kinds(section), "edited.yaml")
    assert raised.value.path == path
    assert reason in raised.value.reason
