"""The guards of a team's own policy (policies/examples/acme.yaml: its own opt-in label and
classes), written by `gpu-admission manifests guards` and put in force as
test_priority_guard.py and test_opt_in_label_guard.py put the shipped ones: the opt-in
label policy on the session's kube-apiserver, the admission configuration on a second
kube-apiserver of the session's etcd. Each guards the team's words, not the default's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.install.priority_classes import priority_class_objects
from webhook.policy import load_default_policy, load_policy_file

from .admission_fixtures import REPO
from .cluster import Cluster
from .controlplane import ControlPlane
from .second_apiserver import second_apiserver
from .test_opt_in_label_guard import TENANT, editor_role, label
from .test_priority_guard import REFUSED, cpu_pod

TEAM_POLICY = REPO / "policies" / "examples" / "acme.yaml"
TEAM = load_policy_file(TEAM_POLICY)
TEAM_KEY, TEAM_VALUE = TEAM.namespace_opt_in
DEFAULT_KEY, _ = load_default_policy().namespace_opt_in
TEAM_CLASSES = [c.priority_class.name for c in TEAM.classes.values()]


@pytest.fixture(scope="module")
def guards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("team-guards")
    written = subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "manifests", "guards",
            "--policy", str(TEAM_POLICY), "--output-dir", str(directory),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    return directory


@pytest.fixture(scope="module")
def label_guarded(controlplane: ControlPlane, guards: Path) -> Iterator[str]:
    """The team's opt-in label policy in force; the name of a namespace to label."""
    policy = guards / "opt-in-label-policy.yaml"
    probe = controlplane.create_namespace("team-guard-probe")
    controlplane.apply(editor_role())
    controlplane.kubectl("apply", "-f", str(policy))
    try:
        controlplane.wait_for(
            lambda: (
                label(
                    controlplane, TENANT, probe, f"{TEAM_KEY}={TEAM_VALUE}", "--dry-run=server"
                ).returncode
                != 0
            ),
            timeout=60,
            what="the team's opt-in label policy to refuse a tenant",
        )
        yield probe
    finally:
        controlplane.kubectl("delete", "-f", str(policy), "--ignore-not-found")
        controlplane.delete("clusterrolebinding", ["opt-in-guard-namespace-editor"])
        controlplane.delete("clusterrole", ["opt-in-guard-namespace-editor"])
        controlplane.delete_namespace(probe, wait=False)


def test_a_tenant_cannot_opt_a_namespace_in_with_the_teams_label(
    controlplane: ControlPlane, label_guarded: str
) -> None:
    refused = label(controlplane, TENANT, label_guarded, f"{TEAM_KEY}={TEAM_VALUE}")

    assert refused.returncode != 0
    assert f"may add, change or remove the label {TEAM_KEY} on a namespace" in refused.stderr


def test_the_default_policys_label_is_no_longer_the_guarded_one(
    controlplane: ControlPlane, label_guarded: str
) -> None:
    """It opts nothing in under the team's policy: the guard leaves it alone."""
    labelled = label(controlplane, TENANT, label_guarded, f"{DEFAULT_KEY}=true", "--dry-run=server")

    assert labelled.returncode == 0, labelled.stderr


@pytest.fixture(scope="module")
def priority_guarded(
    controlplane: ControlPlane, guards: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, str, str]]:
    """kubectl through a kube-apiserver with the team's admission configuration; a
    namespace without the team's quota and one with it."""
    classes = priority_class_objects(TEAM)
    controlplane.apply(json.dumps({"apiVersion": "v1", "kind": "List", "items": classes}))
    without = controlplane.create_namespace("team-guard-no-quota")
    granted = controlplane.create_namespace("team-guard-granted")
    controlplane.apply((guards / "gpu-priority-quota.yaml").read_text("utf-8"), namespace=granted)
    try:
        with second_apiserver(
            controlplane,
            tmp_path_factory.mktemp("team-guarded-apiserver"),
            guards / "admission-configuration.yaml",
        ) as cluster:
            yield cluster, without, granted
    finally:
        controlplane.delete_namespace(without, wait=False)
        controlplane.delete_namespace(granted, wait=False)
        controlplane.delete("priorityclass", TEAM_CLASSES)


@pytest.mark.parametrize("priority_class", TEAM_CLASSES)
def test_a_pod_borrowing_a_team_class_is_refused_where_no_quota_grants_it(
    priority_guarded: tuple[Cluster, str, str], priority_class: str
) -> None:
    cluster, without, _ = priority_guarded

    refused = cluster.apply(
        cpu_pod(f"borrows-{priority_class}", priority_class), namespace=without, check=False
    )

    assert refused.returncode != 0
    assert REFUSED in refused.stderr and priority_class in refused.stderr


@pytest.mark.parametrize("priority_class", TEAM_CLASSES)
def test_a_pod_of_a_team_class_is_admitted_where_the_teams_quota_grants_it(
    priority_guarded: tuple[Cluster, str, str], priority_class: str
) -> None:
    cluster, _, granted = priority_guarded
    name = f"granted-{priority_class}"

    cluster.wait_for(
        lambda: (
            cluster.apply(cpu_pod(name, priority_class), namespace=granted, check=False).returncode
            == 0
        ),
        timeout=30,
        what="the quota controller to compute the team's quota's status",
    )

    assert cluster.get_json("pod", name, granted)["spec"]["priorityClassName"] == priority_class
