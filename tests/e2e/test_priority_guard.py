"""The Kubernetes-native priority guard: deploy/guards/admission-configuration.yaml and
gpu-priority-quota.yaml, through a kube-apiserver that reads the shipped file.

A second kube-apiserver on the session's etcd (second_apiserver.py) carries the
admission configuration, so the other tests' namespaces, where the webhook sets
`inference-priority` on GPU pods without a quota, keep the apiserver they expect. The
pods here are CPU pods in namespaces that are not opted in: the webhooks never see them,
so what refuses or admits them is kube-apiserver's ResourceQuota plugin alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from .admission_fixtures import REPO
from .cluster import Cluster
from .controlplane import ControlPlane
from .second_apiserver import second_apiserver

GUARDS = REPO / "deploy" / "guards"
REFUSED = "insufficient quota to match these scopes"


@dataclass(frozen=True)
class Namespaces:
    without_quota: str
    with_quota: str


def cpu_pod(name: str, priority_class: str | None) -> str:
    spec: dict[str, object] = {"containers": [{"name": "etl", "image": "registry.example/etl:1"}]}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


@pytest.fixture(scope="module")
def guarded(
    controlplane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """kubectl through a kube-apiserver started with the shipped admission configuration."""
    controlplane.apply((REPO / "deploy" / "base" / "priorityclasses.yaml").read_text("utf-8"))
    with second_apiserver(
        controlplane,
        tmp_path_factory.mktemp("guarded-apiserver"),
        GUARDS / "admission-configuration.yaml",
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def namespaces(controlplane: ControlPlane) -> Iterator[Namespaces]:
    created = Namespaces(
        controlplane.create_namespace("priority-guard-none"),
        controlplane.create_namespace("priority-guard-granted"),
    )
    controlplane.apply(
        (GUARDS / "gpu-priority-quota.yaml").read_text("utf-8"), namespace=created.with_quota
    )
    try:
        yield created
    finally:
        controlplane.delete_namespace(created.without_quota, wait=False)
        controlplane.delete_namespace(created.with_quota, wait=False)


@pytest.mark.parametrize("priority_class", ["inference-priority", "training-priority"])
def test_a_cpu_pod_naming_a_gpu_class_is_refused_where_no_quota_grants_the_class(
    guarded: Cluster, namespaces: Namespaces, priority_class: str
) -> None:
    refused = guarded.apply(
        cpu_pod(f"borrows-{priority_class}", priority_class),
        namespace=namespaces.without_quota,
        check=False,
    )

    assert refused.returncode != 0
    assert REFUSED in refused.stderr, refused.stderr
    assert priority_class in refused.stderr


@pytest.mark.parametrize("priority_class", ["inference-priority", "training-priority"])
def test_a_pod_naming_a_gpu_class_is_admitted_where_the_quota_grants_it(
    guarded: Cluster, namespaces: Namespaces, priority_class: str
) -> None:
    name = f"granted-{priority_class}"
    guarded.wait_for(
        lambda: (
            guarded.apply(
                cpu_pod(name, priority_class), namespace=namespaces.with_quota, check=False
            ).returncode
            == 0
        ),
        timeout=30,
        what="the quota controller to compute the quota's status",
    )

    pod = guarded.get_json("pod", name, namespaces.with_quota)
    assert (pod["spec"]["priorityClassName"], pod["spec"]["priority"]) == (
        priority_class,
        {"inference-priority": 1000000, "training-priority": 1000}[priority_class],
    )


@pytest.mark.parametrize("priority_class", [None, "system-cluster-critical"])
def test_pods_of_other_classes_are_admitted_without_a_quota(
    guarded: Cluster, namespaces: Namespaces, priority_class: str | None
) -> None:
    name = f"other-{priority_class or 'none'}"

    guarded.apply(cpu_pod(name, priority_class), namespace=namespaces.without_quota)

    assert guarded.exists("pod", name, namespaces.without_quota)


def test_without_the_admission_configuration_the_same_pod_borrows_the_class(
    controlplane: ControlPlane, guarded: Cluster, namespaces: Namespaces
) -> None:
    """The bypass the guard closes: the session's own apiserver has no such configuration."""
    controlplane.apply(
        cpu_pod("borrows-unguarded", "inference-priority"), namespace=namespaces.without_quota
    )

    pod = controlplane.get_json("pod", "borrows-unguarded", namespaces.without_quota)
    assert pod["spec"]["priority"] == 1000000
