"""`gpu-admission check --admitted` against the real kube-apiserver and webhooks: the
objects it prints, applied with `kubectl apply --dry-run=server` in an opted-in
namespace, come back with every field the mutation writes as printed (our webhooks
find nothing left to inject), and the pods and templates the policy governs are
admitted."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import yaml

from .admission_fixtures import EXAMPLES
from .controlplane import ControlPlane
from .webhook_server import WebhookServer

EXAMPLE_FILES = ("mig-inference-pod.yaml", "training-job.yaml", "cpu-pod.yaml")
INJECTED = ("affinity", "priorityClassName", "priority", "preemptionPolicy")


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]
    return spec["template"]["spec"] if obj["kind"] == "Job" else spec


def test_the_admitted_objects_come_back_through_the_webhooks_as_printed(
    controlplane: ControlPlane, admission: WebhookServer, opted_in: str
) -> None:
    files = [str(EXAMPLES / name) for name in EXAMPLE_FILES]
    printed = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "check", "--admitted", *files],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    written = list(yaml.safe_load_all(printed.stdout))

    applied = controlplane.kubectl(
        "apply", "--dry-run=server", "-o", "json", "-n", opted_in, "-f", "-",
        input=printed.stdout,
    )  # fmt: skip

    items = json.loads(applied.stdout)
    returned = items["items"] if items.get("kind") == "List" else [items]
    assert [o["metadata"]["name"] for o in returned] == [o["metadata"]["name"] for o in written]
    for before, after in zip(written, returned, strict=True):
        expected, stored = pod_spec(before), pod_spec(after)
        for field in INJECTED:
            if field in expected:  # else kube-apiserver's own defaults (priority 0)
                assert stored[field] == expected[field], (before["metadata"]["name"], field)
        for ours in expected.get("tolerations", []):
            assert ours in stored["tolerations"]  # kube-apiserver adds its own beside ours
        for mine, theirs in zip(expected["containers"], stored["containers"], strict=True):
            assert theirs.get("env") == mine.get("env")
            for kind in ("limits", "requests"):
                wanted = mine.get("resources", {}).get(kind, {})
                assert {k: theirs["resources"][kind][k] for k in wanted} == {
                    k: str(v) for k, v in wanted.items()
                }
