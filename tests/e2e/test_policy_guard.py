"""The policy ConfigMap's webhook through kube-apiserver and `kubectl apply`.

A broken policy is refused at apply with the line, field path and reason of each
problem in kubectl's own output; a good edit is admitted, and the service, handed what
the cluster stored (as kubelet would project it into its volume), serves it; and with
the service stopped, the webhook fails open, so the operator can still apply a repair.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.install.configurations import POLICY_WEBHOOK
from webhook.install.names import NAMESPACE, POLICY_CONFIGMAP, WEBHOOK_CONFIGURATION
from webhook.policy.load import default_policy_text

from .controlplane import ControlPlane
from .waiting import wait_for
from .webhook_server import WebhookServer

SIX_GPU_TRAINING_POD = """
apiVersion: v1
kind: Pod
metadata:
  generateName: guard-
  labels:
    gpu-admission.io/workload: training
spec:
  containers:
    - name: trainer
      image: registry.example/resnet-train:2.0
      resources:
        limits: {nvidia.com/gpu: 6}
"""
STRICTER = "largest node in pool training has 4"

TWO_TYPOS = (
    default_policy_text()
    .replace("    gpusPerNode: 8\n    # taints", "    gpusPerNod: 8\n    # taints", 1)
    .replace("pools: [training]", "pools: [trainig]", 1)
)
FOUR_GPU_TRAINING_NODES = default_policy_text().replace(
    "  training:\n    gpusPerNode: 8", "  training:\n    gpusPerNode: 4", 1
)
assert "gpusPerNod:" in TWO_TYPOS
assert default_policy_text() != FOUR_GPU_TRAINING_NODES


def policy_configmap(text: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": POLICY_CONFIGMAP, "namespace": NAMESPACE},
            "data": {"policy.yaml": text},
        }
    )


def line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if fragment in line)


def write_atomically(path: Path, text: str) -> None:
    """Replace the file in one step, as a ConfigMap volume's symlink swap does."""
    staged = path.with_suffix(".staged")
    staged.write_text(text, "utf-8")
    os.replace(staged, path)


@pytest.fixture
def install_namespace(controlplane: ControlPlane, admission: WebhookServer) -> Iterator[str]:
    """The service's namespace, where the policy ConfigMap lives; left as it was found."""
    existed = controlplane.exists("namespace", NAMESPACE)
    if not existed:
        controlplane.create_namespace(NAMESPACE)
    try:
        yield NAMESPACE
    finally:
        controlplane.delete("configmap", [POLICY_CONFIGMAP], NAMESPACE)
        if not existed:
            controlplane.delete_namespace(NAMESPACE)


@pytest.fixture
def policy_file(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path: Path
) -> Iterator[Path]:
    path = tmp_path / "policy.yaml"
    path.write_text(default_policy_text(), "utf-8")
    with admission.serving(controlplane.kubeconfig, path, reload_interval=0.5):
        yield path


def test_a_broken_policy_is_refused_at_apply_with_each_problems_line_and_path(
    controlplane: ControlPlane, install_namespace: str
) -> None:
    result = controlplane.apply(policy_configmap(TWO_TYPOS), check=False)

    assert result.returncode != 0
    error = result.stderr
    assert f'admission webhook "{POLICY_WEBHOOK}" denied the request' in error
    source = f"{POLICY_CONFIGMAP}/policy.yaml"
    assert f"{source}:{line_of(TWO_TYPOS, 'gpusPerNod:')}: pools.inference.gpusPerNod: " in error
    assert f"{source}:{line_of(TWO_TYPOS, '[trainig]')}: classes.training.pools[0]: " in error
    assert "unknown pool 'trainig'" in error
    assert not controlplane.exists("configmap", POLICY_CONFIGMAP, install_namespace)


def test_a_valid_edit_is_admitted_and_what_was_stored_is_what_the_service_serves(
    controlplane: ControlPlane, install_namespace: str, policy_file: Path, opted_in: str
) -> None:
    controlplane.apply(policy_configmap(default_policy_text()))
    controlplane.apply(policy_configmap(FOUR_GPU_TRAINING_NODES))

    stored = controlplane.get_json("configmap", POLICY_CONFIGMAP, install_namespace)
    write_atomically(policy_file, stored["data"]["policy.yaml"])

    def denied_as_stricter() -> bool | None:
        result = controlplane.kubectl(
            "create", "-f", "-", "--namespace", opted_in, input=SIX_GPU_TRAINING_POD, check=False
        )
        return True if result.returncode != 0 and STRICTER in result.stderr else None

    controlplane.wait_for(denied_as_stricter, timeout=30, what="the stored policy to serve")


def test_with_the_service_stopped_a_repair_can_still_be_applied(
    controlplane: ControlPlane, install_namespace: str, admission: WebhookServer
) -> None:
    admission.stop()
    try:
        repaired = controlplane.apply(policy_configmap(default_policy_text()), check=False)
    finally:
        admission.start()

    assert repaired.returncode == 0, repaired.stderr
    stored = controlplane.get_json("configmap", POLICY_CONFIGMAP, install_namespace)
    assert stored["data"]["policy.yaml"] == default_policy_text()


def test_a_valid_edit_applied_right_after_install_is_admitted(
    controlplane: ControlPlane, admission: WebhookServer, install_namespace: str
) -> None:
    """A replica started before the webhook configurations were applied read none; the
    configurations applied, a valid edit at once is admitted, not refused for
    configurations 'not installed' that are there (they are read again before a refusal)."""
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        controlplane.delete(kind, [WEBHOOK_CONFIGURATION])
    try:
        admission.start(None, kubeconfig=controlplane.kubeconfig)
        wait_for(
            lambda: "not installed" in _scope_detail(admission) or None,
            60,
            "the replica to read no configurations",
            describe_last=admission.log,
        )
        admission.register(controlplane.kubeconfig)

        def guarded() -> str | None:  # kube-apiserver calls the policy's webhook now
            refused = controlplane.apply(policy_configmap(TWO_TYPOS), check=False)
            return refused.stderr if POLICY_WEBHOOK in refused.stderr else None

        wait_for(guarded, 30, "kube-apiserver to call the policy ConfigMap's webhook")
        edit = controlplane.apply(policy_configmap(FOUR_GPU_TRAINING_NODES), check=False)
    finally:
        admission.start(None)
        admission.register(controlplane.kubeconfig)

    assert edit.returncode == 0, edit.stderr


def _scope_detail(admission: WebhookServer) -> str:
    checks = admission.readiness().get("checks", {})
    return str(checks.get("webhook-configurations", {}).get("detail", ""))
