"""A team's own policy, installed three ways, on a cluster of its own.

The policy (policies/examples/acme.yaml) shares nothing with the default but its shape:
another opt-in label, workload and model labels, pool label (a provider's node-group
label) and model label (GPU Feature Discovery's product), other class and PriorityClass
names and values, an untainted serving pool. Its cluster is a control plane of this
module's own whose nodes are the fleet's machines under that cluster's names
(``policy_world.fleet_for``).

Each install path (`gpu-admission install --policy`, the chart with the values `manifests
helm-values` prints, and the overlay `manifests overlay` writes, applied with `kubectl
apply -k`) must create the policy's PriorityClasses and webhooks that select the policy's
namespaces; then, its webhooks pointed at a serve process of the test serving the policy
(no kubelet runs the chart's replicas), the examples in the policy's words are applied to
a namespace carrying its label: mutated and bound to the pools of their class, at its
priority, or refused.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from webhook.engine.mutate import INJECTED_ANNOTATION
from webhook.install.priority_classes import priority_class_objects
from webhook.policy import Policy, load_policy_file

from .admission_fixtures import REPO
from .controlplane import ControlPlane
from .helm_cli import run_helm
from .nodes import register_fleet
from .policy_world import examples_for, fleet_for, pool_of_node
from .test_deploy import CONFIGURATIONS, pointed_at
from .test_install import wait_until_gone
from .webhook_server import WebhookServer

TEAM_POLICY = REPO / "policies" / "examples" / "acme.yaml"
CHART = REPO / "deploy" / "helm" / "gpu-admission"
NAMESPACE = "gpu-admission"
DEFAULT_CLASSES = ("inference-priority", "training-priority")


class TeamCluster:
    def __init__(self, plane: ControlPlane, server: WebhookServer, policy: Policy, examples: Path):
        self.plane, self.server, self.policy, self.examples = plane, server, policy, examples

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "webhook.cli", *args],
            capture_output=True, text=True, timeout=180, cwd=REPO, check=False,
        )  # fmt: skip

    def priority_classes(self) -> dict[str, tuple[int, str]]:
        return {
            o["metadata"]["name"]: (o["value"], o.get("preemptionPolicy", ""))
            for o in self.plane.list_json("priorityclasses")
            if not o["metadata"]["name"].startswith("system-")
        }

    def assert_installed_as_the_policy_says(self) -> None:
        """The policy's PriorityClasses (and no other), and every opted-in webhook
        selecting namespaces by its label."""
        key, value = self.policy.namespace_opt_in
        selectors = [
            hook["namespaceSelector"]["matchExpressions"][0]
            for kind in CONFIGURATIONS
            for hook in self.plane.get_json(kind, "gpu-admission")["webhooks"]
            if hook["name"] != "validate-policy.gpu-admission.io"
        ]
        assert self.priority_classes() == expected_classes(self.policy)
        assert selectors and all(
            s == {"key": key, "operator": "In", "values": [value]} for s in selectors
        )


@pytest.fixture(scope="module")
def team(
    controlplane_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TeamCluster]:
    work = tmp_path_factory.mktemp("team-cluster")
    policy = load_policy_file(TEAM_POLICY)
    plane = ControlPlane(controlplane_bin_dir, work / "controlplane")
    plane.start()
    server = WebhookServer(work / "server")
    try:
        register_fleet(plane, fleet_for(policy))
        server.start(TEAM_POLICY, kubeconfig=plane.kubeconfig)
        yield TeamCluster(plane, server, policy, examples_for(policy, work))
    finally:
        server.stop()
        plane.stop()


def expected_classes(policy: Policy) -> dict[str, tuple[int, str]]:
    return {
        o["metadata"]["name"]: (o["value"], o["preemptionPolicy"])
        for o in priority_class_objects(policy)
    }


def examples_hold(team: TeamCluster, namespace: str) -> None:
    """The examples in the policy's words, in a namespace opted in with its label: each
    workload's pods mutated, bound to a node of their class's pool at its priority; each
    denied example refused by our webhooks."""
    plane, policy = team.plane, team.policy
    key, value = policy.namespace_opt_in
    plane.create_namespace(namespace, {key: value})
    try:
        for path in sorted(team.examples.glob("*.yaml")):
            plane.apply(path.read_text("utf-8"), namespace=namespace)
        refused = {
            path.stem: plane.apply(path.read_text("utf-8"), namespace=namespace, check=False)
            for path in sorted((team.examples / "denied").glob("*.yaml"))
        }
        plane.wait_for(
            lambda: _bound(plane, namespace, 7), timeout=90, what="the examples' pods to bind"
        )
        pools = {
            n["metadata"]["name"]: pool_of_node(policy, n["metadata"].get("labels", {}))
            for n in plane.list_json("nodes")
        }
        pods = {p["metadata"]["name"]: p for p in plane.list_json("pods", namespace)}
        [serving_class, batch_class] = policy.classes.values()
        for pod in pods.values():
            labels = pod["metadata"].get("labels", {})
            workload = labels.get(policy.workload_label)
            if workload is None:
                continue
            wanted = policy.classes[workload]
            assert pools[pod["spec"]["nodeName"]] in wanted.pools, pod["metadata"]["name"]
            assert pod["spec"]["priorityClassName"] == wanted.priority_class.name
            assert pod["spec"]["priority"] == wanted.priority_class.value
            assert INJECTED_ANNOTATION in pod["metadata"]["annotations"]
        assert pods["embedder"]["spec"]["priorityClassName"] == serving_class.priority_class.name
        trainers = [p for n, p in pods.items() if n.startswith("resnet-train-")]
        assert trainers and all(
            p["spec"]["preemptionPolicy"] == batch_class.priority_class.preemption_policy
            for p in trainers
        )
        for name, answer in refused.items():
            assert answer.returncode != 0, name
            assert f"gpu-admission denied pod '{namespace}/{name}'" in answer.stderr, answer.stderr
    finally:
        plane.delete_namespace(namespace, wait=False)


def _bound(plane: ControlPlane, namespace: str, count: int) -> bool:
    pods = plane.list_json("pods", namespace)
    return len(pods) >= count and all(p["spec"].get("nodeName") for p in pods)


def test_install_creates_the_policys_classes_and_webhooks_of_its_label(team: TeamCluster) -> None:
    installed = team.cli(
        "install", "--policy", str(TEAM_POLICY), "--wait", "0",
        "--kubeconfig", str(team.plane.kubeconfig),
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    try:
        team.assert_installed_as_the_policy_says()
        with pointed_at(team.plane, team.server):
            examples_hold(team, "team-install")
    finally:
        removed = team.cli("uninstall", "--kubeconfig", str(team.plane.kubeconfig))
        assert removed.returncode == 0, removed.stderr
        wait_until_gone(team.plane)

    assert team.priority_classes() == {}


def test_the_chart_with_its_helm_values_creates_the_policys_classes_and_webhooks(
    team: TeamCluster, controlplane_bin_dir: Path, tmp_path: Path
) -> None:
    values = tmp_path / "acme-values.yaml"
    printed = team.cli("manifests", "helm-values", "--policy", str(TEAM_POLICY))
    assert printed.returncode == 0, printed.stderr
    values.write_text(printed.stdout, "utf-8")
    team.plane.apply((REPO / "deploy" / "base" / "namespace.yaml").read_text("utf-8"))

    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return run_helm(
            controlplane_bin_dir / "helm", team.plane.kubeconfig, tmp_path / "home", NAMESPACE,
            *args,
        )  # fmt: skip

    installed = helm("install", "gpu-admission", str(CHART), "-f", str(values))
    try:
        key, value = team.policy.namespace_opt_in
        assert f"kubectl label namespace NAME {key}={value}" in installed.stdout
        assert "acme-inference (500000, PreemptLowerPriority)" in installed.stdout
        team.assert_installed_as_the_policy_says()
        with pointed_at(team.plane, team.server):
            examples_hold(team, "team-helm")
        # What install made, uninstall removes; a release is Helm's to remove.
        refused = team.cli("uninstall", "--kubeconfig", str(team.plane.kubeconfig))
        assert refused.returncode == 2
        assert f"Helm release {NAMESPACE}/gpu-admission" in refused.stderr
        team.assert_installed_as_the_policy_says()
    finally:
        helm("uninstall", "gpu-admission", "--wait")
        team.plane.delete_namespace(NAMESPACE)

    assert team.priority_classes() == {}


def test_the_overlay_manifests_overlay_writes_installs_the_policy_with_kubectl(
    team: TeamCluster, tmp_path: Path
) -> None:
    overlay = tmp_path / "acme"
    written = team.cli(
        "manifests", "overlay", "--policy", str(TEAM_POLICY), "--output-dir", str(overlay),
        "--base", str(REPO / "deploy" / "base"),
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    team.plane.kubectl("apply", "-k", str(overlay))
    try:
        team.assert_installed_as_the_policy_says()
        assert not set(DEFAULT_CLASSES) & set(team.priority_classes())
        config_maps = team.plane.list_json("configmaps", NAMESPACE)
        [served] = [
            c for c in config_maps if c["metadata"]["name"].startswith("gpu-admission-policy")
        ]
        assert served["data"]["policy.yaml"] == TEAM_POLICY.read_text("utf-8")
        with pointed_at(team.plane, team.server):
            examples_hold(team, "team-kustomize")
    finally:
        team.plane.kubectl("delete", "-k", str(overlay), "--wait=false", check=False)
        wait_until_gone(team.plane)


def test_the_rendered_priority_classes_and_examples_say_the_policys_words(
    team: TeamCluster,
) -> None:
    """The examples the tests above apply are the policy's: no default label is left."""
    text = "".join(p.read_text("utf-8") for p in team.examples.rglob("*.yaml"))
    default_words = ("gpu-admission.io/workload", "inference-priority", "gpu-pool")

    assert not [word for word in default_words if word in text]
    assert yaml.safe_load((team.examples / "denied" / "no-class.yaml").read_text("utf-8"))
