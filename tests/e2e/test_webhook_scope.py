"""A replica reports webhook configurations that do not send what its policy needs.

The session's service is registered with the configurations of the default policy. A
second `gpu-admission serve`, with `--kubeconfig` and a policy whose workload label is
another, reads those configurations through the real kube-apiserver and says in its
/readyz detail and its metric that they select the old label, while staying ready; its
policy file set back to the default, it reports no mismatch at its reload. Nothing of
the cluster is changed, so the session's other tests are not disturbed.

The session's service, serving with `--kubeconfig`, refuses a `kubectl apply` of the
policy ConfigMap that renames the workload label, saying what differs and the command
that fixes it, and admits the same apply carrying the annotation of its scope's digest
(as the chart and `install` write it, applying the configurations next); the ConfigMap
is then set back and removed.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from webhook.install.configurations import MUTATING_WEBHOOK, POLICY_WEBHOOK
from webhook.install.names import NAMESPACE, POLICY_CONFIGMAP
from webhook.install.scope import FIX, SCOPE_ANNOTATION, scope_digest
from webhook.policy.load import default_policy_text, load_policy_text

from .controlplane import ControlPlane
from .ports import free_ports
from .processes import Component
from .waiting import wait_for
from .webhook_server import WebhookServer

SERIES = "gpu_admission_webhook_configuration_mismatch"
RENAMED = default_policy_text().replace(
    "workload: gpu-admission.io/workload", "workload: team.example/class"
)


def readiness(port: int) -> tuple[int, dict[str, Any]]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the dev certificate of the second service
    try:
        with urllib.request.urlopen(
            f"https://127.0.0.1:{port}/readyz", timeout=5, context=context
        ) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def scope_detail(port: int) -> str:
    try:
        _, document = readiness(port)
    except OSError:
        return ""
    check = document.get("checks", {}).get("webhook-configurations", {})
    return str(check.get("detail", ""))


def detail_starting(port: int, start: str) -> str | None:
    detail = scope_detail(port)
    return detail if detail.startswith(start) else None


def mismatch(port: int, webhook: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        exposition = reply.read().decode("utf-8")
    prefix = f'{SERIES}{{webhook="{webhook}"}} '
    for line in exposition.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return None


def test_a_replica_reports_configurations_of_another_workload_label_and_none_once_it_matches(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(RENAMED, "utf-8")
    https, metrics = free_ports(2)
    command = [
        "env", f"XDG_CACHE_HOME={tmp_path / 'cache'}",
        sys.executable, "-m", "webhook.cli", "serve",
        "--port", str(https), "--metrics-port", str(metrics),
        "--policy", str(policy), "--reload-interval", "0.5",
        "--kubeconfig", str(controlplane.kubeconfig),
    ]  # fmt: skip
    service = Component("gpu-admission-scope", command, tmp_path / "serve.log")
    service.start()
    try:
        differing = wait_for(
            lambda: detail_starting(https, "differ from"),
            60,
            "the mismatch in /readyz",
            describe_last=service.log_tail,
        )
        status, document = readiness(https)
        renamed_mismatch = mismatch(metrics, MUTATING_WEBHOOK)
        logged = service.log_tail()

        policy.write_text(default_policy_text(), "utf-8")
        matching = wait_for(
            lambda: detail_starting(https, "send what"),
            60,
            "no mismatch once the policy is the one the configurations were rendered from",
            describe_last=service.log_tail,
        )
        default_mismatch = mismatch(metrics, MUTATING_WEBHOOK)
    finally:
        service.stop()

    assert (
        f"{MUTATING_WEBHOOK}: its objectSelector selects gpu-admission.io/workload, "
        "the policy's workload label is team.example/class"
    ) in differing
    assert "gpu-admission install --policy FILE" in differing
    assert status == 200 and document["checks"]["webhook-configurations"]["ok"] is True
    assert renamed_mismatch == 1
    assert "do not send what the policy needs" in logged
    assert matching.startswith("send what the policy needs (compared ")
    assert default_mismatch == 0


def policy_configmap(text: str, annotations: dict[str, str] | None = None) -> str:
    metadata: dict[str, Any] = {"name": POLICY_CONFIGMAP, "namespace": NAMESPACE}
    if annotations:
        metadata["annotations"] = annotations
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "data": {"policy.yaml": text},
        }
    )


def test_an_apply_renaming_the_workload_label_is_refused_with_the_fix_unless_it_carries_its_scope(
    controlplane: ControlPlane, admission: WebhookServer, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(default_policy_text(), "utf-8")
    digest = scope_digest(load_policy_text(RENAMED, "renamed.yaml"))
    namespace_existed = controlplane.exists("namespace", NAMESPACE)
    if not namespace_existed:
        controlplane.create_namespace(NAMESPACE)
    try:
        with admission.serving(controlplane.kubeconfig, policy, kubeconfig=controlplane.kubeconfig):

            def compared() -> str | None:
                checks = admission.readiness().get("checks", {})
                detail = str(checks.get("webhook-configurations", {}).get("detail", ""))
                return detail if detail.startswith("send what") else None

            wait_for(compared, 60, "the live configurations read", describe_last=admission.log)
            refused = controlplane.apply(policy_configmap(RENAMED), check=False)
            admitted = controlplane.apply(
                policy_configmap(RENAMED, {SCOPE_ANNOTATION: digest}), check=False
            )
            stored = controlplane.get_json("configmap", POLICY_CONFIGMAP, NAMESPACE)
            restored = controlplane.apply(policy_configmap(default_policy_text()), check=False)
    finally:
        controlplane.delete("configmap", [POLICY_CONFIGMAP], NAMESPACE)
        if not namespace_existed:
            controlplane.delete_namespace(NAMESPACE)

    assert refused.returncode != 0
    assert f'admission webhook "{POLICY_WEBHOOK}" denied the request' in refused.stderr
    assert (
        f"{MUTATING_WEBHOOK}: its objectSelector selects gpu-admission.io/workload, "
        "the policy's workload label is team.example/class"
    ) in refused.stderr
    assert "gpu-admission manifests helm-values --policy FILE" in refused.stderr
    assert "gpu-admission install --policy FILE" in refused.stderr
    assert FIX in refused.stderr
    assert admitted.returncode == 0, admitted.stderr
    assert "Warning" not in admitted.stderr
    assert stored["data"]["policy.yaml"] == RENAMED
    assert stored["metadata"]["annotations"][SCOPE_ANNOTATION] == digest
    assert restored.returncode == 0, restored.stderr
