"""The opt-in label guard: deploy/guards/opt-in-label-policy.yaml, a
ValidatingAdmissionPolicy, on the session's kube-apiserver, driven with the real kubectl.

Two people may edit namespaces (a ClusterRole granted here): `tenant`, in no allowed
group, and `platform`, in `gpu-admission:namespace-admins`. kubectl impersonates each
(`--as`, `--as-group`), so kube-apiserver authorizes and admits the request as theirs.
The policy is removed afterwards; every other test labels namespaces as the admin, a
member of `system:masters`, which the policy allows anyway.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from subprocess import CompletedProcess

import pytest

from .admission_fixtures import REPO
from .controlplane import ControlPlane

POLICY = REPO / "deploy" / "guards" / "opt-in-label-policy.yaml"
LABEL = "gpu-admission.io/enabled"
TENANT = ("--as=tenant", "--as-group=team-a")
PLATFORM = ("--as=platform", "--as-group=gpu-admission:namespace-admins")
EDITOR = "opt-in-guard-namespace-editor"
REFUSED = f"may add, change or remove the label {LABEL} on a namespace"
PROBE = "opt-in-guard-probe"


def editor_role() -> str:
    """Whoever is bound may create and edit every namespace: only the policy stops them."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": EDITOR},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["namespaces"],
                "verbs": ["get", "list", "create", "update", "patch"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": EDITOR},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": EDITOR},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
            for user in ("tenant", "platform")
        ],
    }
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]})


def label(
    controlplane: ControlPlane, who: tuple[str, ...], namespace: str, *change: str
) -> CompletedProcess[str]:
    return controlplane.kubectl(
        "label", "namespace", namespace, *change, "--overwrite", *who, check=False
    )


def labels(controlplane: ControlPlane, namespace: str) -> dict[str, str]:
    found: dict[str, str] = controlplane.get_json("namespace", namespace)["metadata"]["labels"]
    return found


@pytest.fixture(scope="module")
def guarded(controlplane: ControlPlane) -> Iterator[None]:
    """The policy applied and in force (kube-apiserver loads it asynchronously)."""
    controlplane.apply(editor_role())
    controlplane.create_namespace(PROBE)
    controlplane.kubectl("apply", "-f", str(POLICY))
    try:
        controlplane.wait_for(
            lambda: (
                REFUSED
                in label(controlplane, TENANT, PROBE, f"{LABEL}=true", "--dry-run=server").stderr
            ),
            timeout=60,
            what="the opt-in label policy to refuse a tenant",
        )
        yield
    finally:
        controlplane.kubectl("delete", "-f", str(POLICY), "--ignore-not-found")
        controlplane.delete("clusterrolebinding", [EDITOR])
        controlplane.delete("clusterrole", [EDITOR])
        controlplane.delete_namespace(PROBE, wait=False)


CHANGES = {
    "add": ({}, f"{LABEL}=true"),
    "turn-on": ({LABEL: "false"}, f"{LABEL}=true"),
    "turn-off": ({LABEL: "true"}, f"{LABEL}=false"),
    "remove": ({LABEL: "true"}, f"{LABEL}-"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_someone_outside_the_groups_cannot_add_change_or_remove_the_label(
    controlplane: ControlPlane, guarded: None, change: str
) -> None:
    initial, edit = CHANGES[change]
    namespace = controlplane.create_namespace(f"opt-in-guard-tenant-{change}", initial)
    try:
        refused = label(controlplane, TENANT, namespace, edit)

        assert refused.returncode != 0
        assert REFUSED in refused.stderr, refused.stderr
        assert "ValidatingAdmissionPolicy 'gpu-admission-opt-in-label'" in refused.stderr
        assert labels(controlplane, namespace).get(LABEL) == initial.get(LABEL)
    finally:
        controlplane.delete_namespace(namespace, wait=False)


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_member_of_the_namespace_admins_group_can(
    controlplane: ControlPlane, guarded: None, change: str
) -> None:
    initial, edit = CHANGES[change]
    namespace = controlplane.create_namespace(f"opt-in-guard-platform-{change}", initial)
    try:
        result = label(controlplane, PLATFORM, namespace, edit)

        assert result.returncode == 0, result.stderr
        expected = None if edit.endswith("-") else edit.split("=")[1]
        assert labels(controlplane, namespace).get(LABEL) == expected
    finally:
        controlplane.delete_namespace(namespace, wait=False)


def test_someone_outside_the_groups_cannot_create_a_namespace_opted_in(
    controlplane: ControlPlane, guarded: None
) -> None:
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "opt-in-guard-created", "labels": {LABEL: "true"}},
    }

    refused = controlplane.kubectl(
        "create", "-f", "-", *TENANT, input=json.dumps(namespace), check=False
    )

    assert refused.returncode != 0
    assert REFUSED in refused.stderr, refused.stderr
    assert not controlplane.exists("namespace", "opt-in-guard-created")


def test_someone_outside_the_groups_may_change_other_labels_and_create_namespaces_without_it(
    controlplane: ControlPlane, guarded: None
) -> None:
    namespace = controlplane.create_namespace("opt-in-guard-other-labels", {LABEL: "true"})
    plain = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "opt-in-guard-plain"}}
    try:
        relabelled = label(controlplane, TENANT, namespace, "team=a")
        created = controlplane.kubectl(
            "create", "-f", "-", *TENANT, input=json.dumps(plain), check=False
        )

        assert relabelled.returncode == 0, relabelled.stderr
        assert labels(controlplane, namespace)["team"] == "a"
        assert labels(controlplane, namespace)[LABEL] == "true"
        assert created.returncode == 0, created.stderr  # outside the policy: the trade-off
    finally:
        controlplane.delete_namespace(namespace, wait=False)
        controlplane.delete_namespace("opt-in-guard-plain", wait=False)
