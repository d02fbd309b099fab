"""Enforcement modes on the real control plane: a rule in warn mode admits and warns.

kube-apiserver passes an AdmissionResponse's warnings on to the client, which
kubectl prints as `Warning: ...` on stderr; the pod is created.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.policy.load import default_policy_text

from .admission_fixtures import example
from .controlplane import ControlPlane
from .webhook_server import WebhookServer


@pytest.fixture
def gpu_count_warns(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path: Path
) -> Iterator[None]:
    policy = tmp_path / "warn.yaml"
    policy.write_text(
        default_policy_text() + "\nenforcement:\n  rules:\n    gpu-count: warn\n", "utf-8"
    )
    with admission.serving(controlplane.kubeconfig, policy):
        yield


def test_a_rule_in_warn_mode_admits_with_a_kubectl_warning(
    controlplane: ControlPlane, gpu_count_warns: None, opted_in: str
) -> None:
    result = controlplane.apply(example("denied/too-many-gpus.yaml"), namespace=opted_in)

    assert "Warning: gpu-admission: gpu-count: " in result.stderr, result.stderr
    assert "created" in result.stdout
    for line in result.stderr.splitlines():
        if line.startswith("Warning: gpu-admission:"):
            assert len(line.removeprefix("Warning: ")) <= 256
