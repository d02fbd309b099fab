"""A broken policy edit under load, through kube-apiserver: no request lost, last good rules kept.

Pods keep being created through the real apiserver (and so through both
webhooks) while the policy file is broken and then fixed with a stricter
rule. Every creation either succeeds or is denied by the rules of the moment;
none fails because the webhook could not answer.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from webhook.policy.load import default_policy_text

from .controlplane import ControlPlane
from .webhook_server import WebhookServer

SIX_GPU_TRAINING_POD = """
apiVersion: v1
kind: Pod
metadata:
  generateName: reload-
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


def write_atomically(path: Path, text: str) -> None:
    """Replace the file in one step, as a ConfigMap volume's symlink swap does."""
    staged = path.with_suffix(".staged")
    staged.write_text(text, "utf-8")
    os.replace(staged, path)


@dataclass
class Outcomes:
    """What each creation gave, in order: 'created', 'stricter' or the error text."""

    results: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def since(self, moment: float) -> list[str]:
        return [outcome for at, outcome in self.results if at >= moment]


@pytest.fixture
def policy_file(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path: Path
) -> Iterator[Path]:
    path = tmp_path / "policy.yaml"
    path.write_text(default_policy_text(), "utf-8")
    with admission.serving(controlplane.kubeconfig, path, reload_interval=0.5):
        yield path


def create_pods(controlplane: ControlPlane, namespace: str, outcomes: Outcomes) -> None:
    while not outcomes.stop.is_set():
        result = controlplane.kubectl(
            "create", "-f", "-", "--namespace", namespace, input=SIX_GPU_TRAINING_POD, check=False
        )
        if result.returncode == 0:
            outcome = "created"
        elif STRICTER in result.stderr:
            outcome = "stricter"
        else:
            outcome = result.stderr.strip()
        outcomes.results.append((time.monotonic(), outcome))


def test_a_broken_edit_keeps_the_last_good_rules_and_a_fix_applies_within_seconds(
    controlplane: ControlPlane, policy_file: Path, opted_in: str
) -> None:
    outcomes = Outcomes()
    creator = threading.Thread(target=create_pods, args=(controlplane, opted_in, outcomes))
    creator.start()
    try:
        time.sleep(3)
        broken_at = time.monotonic()
        write_atomically(
            policy_file, default_policy_text().replace("gpusPerNode: 8", "gpusPerNode: [8]", 1)
        )
        time.sleep(5)
        fixed_at = time.monotonic()
        stricter = default_policy_text().replace(
            "  training:\n    gpusPerNode: 8", "  training:\n    gpusPerNode: 4"
        )
        assert stricter != default_policy_text()
        write_atomically(policy_file, stricter)
        controlplane.wait_for(
            lambda: "stricter" in outcomes.since(fixed_at),
            timeout=20,
            what="the fixed policy's stricter rule to deny a 6-GPU pod",
        )
        time.sleep(2)
    finally:
        outcomes.stop.set()
        creator.join(timeout=60)

    failures = [o for _, o in outcomes.results if o not in ("created", "stricter")]
    assert not failures, failures
    during_broken_edit = [o for at, o in outcomes.results if broken_at + 2 <= at < fixed_at]
    assert during_broken_edit and set(during_broken_edit) == {"created"}, during_broken_edit
    last = outcomes.since(fixed_at)[-3:]
    assert last == ["stricter"] * len(last), last
