"""Who may do what: the roles deploy/base grants to each of its ServiceAccounts.

The `serve` pods answer the network, so they may only read what the service reads (the
live inventory, the workloads autoscalers target, the key names of the ConfigMaps and
Secrets a pod takes whole, what the audit lists, our own webhook
configurations by name) and write only the audit's PolicyReports, by name where a name
can be given. Certificate rotation
writes, under an identity of its own, only the objects it replaces, by name. The
objects are read as `gpu-admission install` reads them (webhook.install.plan.base_objects);
tests/e2e/test_deploy.py asks kube-apiserver the same questions with `kubectl auth can-i`.
"""

from __future__ import annotations

from typing import Any

import pytest

from webhook.install.names import NAMESPACE
from webhook.install.plan import base_objects

SERVE = "gpu-admission"
ROTATION = "gpu-admission-cert-rotation"
WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate"]  # fmt: skip
CLUSTER = "cluster-wide"

Objects = list[dict[str, Any]]


@pytest.fixture(scope="module")
def base() -> Objects:
    return base_objects()


def granted(objects: Objects, service_account: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, rule) for every rule bound to the ServiceAccount: ``cluster-wide`` through a
    ClusterRoleBinding, the binding's namespace through a RoleBinding."""
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if o["kind"].endswith("Role")}
    rules = []
    for binding in (o for o in objects if o["kind"].endswith("RoleBinding")):
        if subject not in binding["subjects"]:
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        where = (
            CLUSTER if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        )
        rules += [(where, rule) for rule in role["rules"]]
    return rules


def pod_spec(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    [workload] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    spec = workload["spec"]
    if kind == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    result: dict[str, Any] = spec["template"]["spec"]
    return result


def test_serve_may_read_the_live_inventory_list_what_runs_read_our_webhooks_and_write_its_reports(
    base: Objects,
) -> None:
    assert granted(base, SERVE) == [
        (CLUSTER, {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}),
        (CLUSTER, {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": ["get", "list", "watch"]}),
        (CLUSTER, {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "deviceclasses"], "verbs": ["get", "list", "watch"]}),
        (CLUSTER, {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates", "resourceclaims"], "verbs": ["get"]}),
        (CLUSTER, {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}),
        (CLUSTER, {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]}),
        (CLUSTER, {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "resourceNames": ["kubernetes"], "verbs": ["get"]}),
        (CLUSTER, {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"], "verbs": ["get", "list"]}),
        (
            CLUSTER,
            {
                "apiGroups": ["kubeflow.org", "ray.io", "jobset.x-k8s.io", "leaderworkerset.x-k8s.io"],
                "resources": ["pytorchjobs", "tfjobs", "mpijobs", "rayclusters", "rayjobs", "jobsets", "leaderworkersets"],
                "verbs": ["get", "list"],
            },
        ),
        (CLUSTER, {"apiGroups": [""], "resources": ["namespaces", "pods"], "verbs": ["list"]}),
        (CLUSTER, {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list"]}),
        (CLUSTER, {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["list"]}),
        (
            CLUSTER,
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                "resourceNames": ["gpu-admission"],
                "verbs": ["get"],
            },
        ),
        (CLUSTER, {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"], "verbs": ["list", "create"]}),
        (
            CLUSTER,
            {
                "apiGroups": ["wgpolicyk8s.io"],
                "resources": ["policyreports"],
                "resourceNames": ["gpu-admission"],
                "verbs": ["get", "update", "delete"],
            },
        ),
    ]  # fmt: skip


def test_serve_may_list_every_kind_the_audit_judges(base: Objects) -> None:
    """The kinds the engine judges at apply time, as the audit lists them."""
    from webhook.engine.templates import BUILT_IN_KINDS
    from webhook.policy import load_default_policy

    listable = {
        (group, resource)
        for _, rule in granted(base, SERVE)
        if "list" in rule["verbs"] and "resourceNames" not in rule
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    kinds = [*BUILT_IN_KINDS, *load_default_policy().workload_kinds]

    assert {(k.group, k.resource) for k in kinds} <= listable
    assert ("", "namespaces") in listable


@pytest.mark.parametrize("verb", WRITE_VERBS)
def test_serve_writes_nothing_but_its_policy_reports(base: Objects, verb: str) -> None:
    for where, rule in granted(base, SERVE):
        assert "*" not in rule["verbs"], (where, rule)
        if verb in rule["verbs"]:
            assert rule["apiGroups"] == ["wgpolicyk8s.io"], (where, rule)
            assert rule["resources"] == ["policyreports"], (where, rule)
            assert verb in ("create", "update", "delete"), (where, rule)
            if verb != "create":
                assert rule["resourceNames"] == ["gpu-admission"], (where, rule)


def test_certificate_rotation_may_replace_its_two_secrets_and_our_ca_bundles_by_name(
    base: Objects,
) -> None:
    assert granted(base, ROTATION) == [
        (
            CLUSTER,
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                "resourceNames": ["gpu-admission"],
                "verbs": ["get", "update"],
            },
        ),
        (
            NAMESPACE,
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": ["gpu-admission-tls", "gpu-admission-tls-ca"],
                "verbs": ["get", "update"],
            },
        ),
    ]


def test_every_binding_grants_its_role_to_one_service_account_of_the_same_name(
    base: Objects,
) -> None:
    bindings = [o for o in base if o["kind"].endswith("RoleBinding")]

    assert sorted((b["kind"], b["metadata"]["name"]) for b in bindings) == [
        ("ClusterRoleBinding", SERVE),
        ("ClusterRoleBinding", ROTATION),
        ("RoleBinding", ROTATION),
    ]
    for binding in bindings:
        name = binding["metadata"]["name"]
        assert binding["roleRef"]["name"] == name
        assert binding["roleRef"]["kind"] == binding["kind"].removesuffix("Binding")
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}
        ]


def test_no_rule_anywhere_uses_a_wildcard(base: Objects) -> None:
    for role in (o for o in base if o["kind"] in ("Role", "ClusterRole")):
        for rule in role["rules"]:
            for values in rule.values():
                assert "*" not in values, rule


def test_the_service_runs_as_serve_and_the_rotation_job_as_rotation(base: Objects) -> None:
    assert pod_spec(base, "Deployment", "gpu-admission")["serviceAccountName"] == SERVE
    assert pod_spec(base, "CronJob", ROTATION)["serviceAccountName"] == ROTATION
