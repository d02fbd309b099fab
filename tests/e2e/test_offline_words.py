"""`gpu-admission check` speaks the webhook's exact words, on the real control plane.

A denied Pod, a denied Deployment and a denied CronJob are applied with kubectl;
kube-apiserver's refusal holds, word for word, the message `gpu-admission check`
reports for the same manifest. A rule in warn mode: kubectl's `Warning: ...` is the
warning check reports, whole (longer than 120 characters, under kube-apiserver's 256).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.policy.load import default_policy_text

from .admission_fixtures import REPO
from .controlplane import ControlPlane
from .webhook_server import WebhookServer

REFUSED = "denied the request: "
TRAINING = {"gpu-admission.io/workload": "training"}
WARN_POLICY = default_policy_text() + "\nenforcement:\n  rules:\n    gpu-count: warn\n"


def template(gpus: int, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": labels},
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [
                {
                    "name": "eval",
                    "image": "registry.example/eval:1",
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                }
            ],
        },
    }


def a_pod(namespace: str, gpus: int, **labels: str) -> dict[str, Any]:
    shape = template(gpus, **labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": namespace, **shape["metadata"]},
        "spec": shape["spec"],
    }


def a_deployment(namespace: str, gpus: int, **labels: str) -> dict[str, Any]:
    shape = template(gpus, app="llm-server", **labels)
    shape["spec"]["restartPolicy"] = "Always"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm-server", "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": "llm-server"}}, "template": shape},
    }


def a_cronjob(namespace: str, gpus: int, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly-eval", "namespace": namespace},
        "spec": {
            "schedule": "0 3 * * *",
            "jobTemplate": {"spec": {"template": template(gpus, **labels)}},
        },
    }


def check(manifest: dict[str, Any], tmp_path: Path, policy: Path | None = None) -> dict[str, Any]:
    """The one pod of `gpu-admission check --output json` for `manifest`."""
    path = tmp_path / f"{manifest['kind'].lower()}.yaml"
    path.write_text(yaml.safe_dump(manifest), "utf-8")
    options = ["--policy", str(policy)] if policy is not None else []
    command = [
        sys.executable,
        "-m",
        "webhook.cli",
        "check",
        *options,
        "--output",
        "json",
        str(path),
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    [pod] = json.loads(result.stdout)["pods"]
    return dict(pod)


def refusal(stderr: str) -> str:
    """What kube-apiserver says after `denied the request: `, to the end of its line."""
    assert REFUSED in stderr, stderr
    return stderr.split(REFUSED, 1)[1].splitlines()[0]


def warnings(stderr: str) -> list[str]:
    return [
        line.removeprefix("Warning: ")
        for line in stderr.splitlines()
        if line.startswith("Warning: gpu-admission")
    ]


POD_SAID = "gpu-admission denied pod '{ns}/trainer': "
DEPLOYMENT_SAID = "gpu-admission denied Deployment '{ns}/llm-server' template (spec.template): "
CRONJOB_SAID = (
    "gpu-admission denied CronJob '{ns}/nightly-eval' template (spec.jobTemplate.spec.template): "
)


@pytest.mark.parametrize(
    ("build", "expected"),
    [(a_pod, POD_SAID), (a_deployment, DEPLOYMENT_SAID), (a_cronjob, CRONJOB_SAID)],
    ids=["pod", "deployment", "cronjob"],
)
def test_kube_apiserver_refuses_with_the_words_check_prints(
    controlplane: ControlPlane, opted_in: str, tmp_path: Path, build: Any, expected: str
) -> None:
    manifest = build(opted_in, 1)  # a GPU and no workload class

    said = check(manifest, tmp_path)
    result = controlplane.apply(json.dumps(manifest), check=False)

    assert result.returncode != 0, result.stdout
    assert said["verdict"] == "denied"
    assert said["message"].startswith(expected.format(ns=opted_in))
    assert refusal(result.stderr) == said["message"]


@pytest.fixture
def gpu_count_warns(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path: Path
) -> Iterator[Path]:
    policy = tmp_path / "warn.yaml"
    policy.write_text(WARN_POLICY, "utf-8")
    with admission.serving(controlplane.kubeconfig, policy):
        yield policy


def test_kubectl_prints_the_warning_check_prints_whole(
    controlplane: ControlPlane, gpu_count_warns: Path, opted_in: str, tmp_path: Path
) -> None:
    manifest = a_pod(opted_in, 9, **TRAINING)

    said = check(manifest, tmp_path, gpu_count_warns)
    result = controlplane.apply(json.dumps(manifest))

    assert said["verdict"] == "allowed"
    assert said["warnings"]
    assert warnings(result.stderr) == said["warnings"]
    assert any(120 < len(w) <= 256 for w in said["warnings"]), said["warnings"]
