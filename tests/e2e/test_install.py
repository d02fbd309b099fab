"""`gpu-admission install` and `uninstall` against the real kube-apiserver.

Without a kubelet the Deployment never becomes available, so install runs
with `--wait 0`; what is proven is what the apiserver accepts and stores:
every object of the base, the certificates, and webhook configurations whose
caBundle verifies the serving certificate for the Service's DNS name, the way
kube-apiserver will verify it. `certs rotate` then runs with a token of each
ServiceAccount the base creates: the rotation job's may rotate, the service's may not.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from webhook.install.names import CA_SECRET, NAMESPACE, TLS_SECRET
from webhook.tls.pki import certificates_from_pem, is_issued_by

from .cluster import Cluster
from .controlplane import ControlPlane
from .kubeconfig import write_token_kubeconfig
from .webhook_server import WebhookServer

SERVICE_DNS = "gpu-admission.gpu-admission.svc"
ROTATION = "gpu-admission-cert-rotation"


def gpu_admission(controlplane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook.cli", *args, "--kubeconfig", str(controlplane.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def installed(controlplane: ControlPlane, admission: WebhookServer) -> Iterator[None]:
    """Installed once for the module; the uninstall test at the end removes it."""
    wait_until_gone(controlplane)
    result = gpu_admission(controlplane, "install", "--wait", "0")
    assert result.returncode == 0, result.stderr
    try:
        yield
    finally:
        # The session's other tests use configurations pointing at the test's webhook.
        admission.register(controlplane.kubeconfig)


def wait_until_gone(controlplane: ControlPlane) -> None:
    """A namespace still terminating from an earlier test refuses new objects. Its
    pods were bound to CPU nodes and, without a kubelet, stay Terminating until the
    harness finishes their deletion."""

    def gone() -> bool:
        if not controlplane.exists("namespace", NAMESPACE):
            return True
        controlplane.finish_terminating_pods(NAMESPACE)
        return False

    controlplane.wait_for(
        gone,
        timeout=90,
        what="the gpu-admission namespace to be deleted",
    )


def secret_data(controlplane: ControlPlane, name: str) -> dict[str, bytes]:
    secret = controlplane.get_json("secret", name, NAMESPACE)
    return {key: base64.b64decode(value) for key, value in secret["data"].items()}


def test_install_creates_every_object_of_the_base(
    controlplane: ControlPlane, installed: None
) -> None:
    for kind, name, namespace in [
        ("namespace", NAMESPACE, None),
        ("serviceaccount", "gpu-admission", NAMESPACE),
        ("clusterrole", "gpu-admission", None),
        ("serviceaccount", ROTATION, NAMESPACE),
        ("clusterrole", ROTATION, None),
        ("role", ROTATION, NAMESPACE),
        ("cronjob", ROTATION, NAMESPACE),
        ("networkpolicy", "gpu-admission", NAMESPACE),
        ("deployment", "gpu-admission", NAMESPACE),
        ("service", "gpu-admission", NAMESPACE),
        ("service", "gpu-admission-metrics", NAMESPACE),
        ("poddisruptionbudget", "gpu-admission", NAMESPACE),
        ("configmap", "gpu-admission-policy", NAMESPACE),
        ("priorityclass", "inference-priority", None),
        ("mutatingwebhookconfiguration", "gpu-admission", None),
        ("validatingwebhookconfiguration", "gpu-admission", None),
    ]:
        assert controlplane.exists(kind, name, namespace), f"{kind}/{name}"


def test_the_ca_bundle_verifies_the_serving_certificate_for_the_service(
    controlplane: ControlPlane, installed: None
) -> None:
    serving = secret_data(controlplane, TLS_SECRET)
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        hook = controlplane.get_json(kind, "gpu-admission")["webhooks"][0]
        assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
        trusted = certificates_from_pem(base64.b64decode(hook["clientConfig"]["caBundle"]))
        verifier = (
            PolicyBuilder().store(Store(trusted)).build_server_verifier(x509.DNSName(SERVICE_DNS))
        )
        leaf = x509.load_pem_x509_certificate(serving["tls.crt"])
        verifier.verify(leaf, [])


def test_a_second_install_keeps_the_certificates(
    controlplane: ControlPlane, installed: None
) -> None:
    before = secret_data(controlplane, TLS_SECRET)

    result = gpu_admission(controlplane, "install", "--wait", "0")

    assert result.returncode == 0, result.stderr
    assert "leaf kept" in result.stdout
    assert secret_data(controlplane, TLS_SECRET)["tls.crt"] == before["tls.crt"]


def test_install_with_a_wait_explains_why_no_replica_is_available(
    controlplane: ControlPlane, installed: None
) -> None:
    result = gpu_admission(controlplane, "install", "--wait", "3")

    assert result.returncode == 1
    assert "no replica of gpu-admission/gpu-admission became available" in result.stderr


def kubeconfig_of(controlplane: ControlPlane, service_account: str, path: Path) -> Path:
    """A kubeconfig that acts as the ServiceAccount, with a token the apiserver issues
    for it (the TokenRequest API, as a kubelet gets one for a pod)."""
    token = controlplane.kubectl(
        "create", "token", service_account, "--namespace", NAMESPACE, "--duration=10m"
    ).stdout.strip()
    return write_token_kubeconfig(
        path,
        server=controlplane.api_url,
        ca_cert=controlplane.ca_path,
        token=token,
        user=service_account,
    )


def rotate_as(kubeconfig: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """`certs rotate` of the Secret the Deployment mounts, as the rotation CronJob runs it."""
    return subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "certs", "rotate",
            "--kubeconfig", str(kubeconfig),
            "--namespace", NAMESPACE, "--secret", TLS_SECRET, "--service", "gpu-admission",
            "--propagation-delay", "0", *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip


def ca_bundles(controlplane: ControlPlane) -> list[list[x509.Certificate]]:
    return [
        certificates_from_pem(base64.b64decode(hook["clientConfig"]["caBundle"]))
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
        for hook in controlplane.get_json(kind, "gpu-admission")["webhooks"]
    ]


def test_the_rotation_service_account_can_rotate_the_ca_and_renew_the_leaf(
    controlplane: ControlPlane, installed: None, tmp_path: Path
) -> None:
    rotation = kubeconfig_of(controlplane, ROTATION, tmp_path / "rotation.kubeconfig")
    before = secret_data(controlplane, TLS_SECRET)
    old_ca = certificates_from_pem(secret_data(controlplane, CA_SECRET)["ca.crt"])[0]

    result = rotate_as(rotation, "--rotate-ca")

    assert result.returncode == 0, result.stderr
    after = secret_data(controlplane, TLS_SECRET)
    new_ca = certificates_from_pem(secret_data(controlplane, CA_SECRET)["ca.crt"])[0]
    assert after["tls.crt"] != before["tls.crt"]
    assert is_issued_by(certificates_from_pem(after["tls.crt"])[0], new_ca)
    assert new_ca != old_ca
    for bundle in ca_bundles(controlplane):
        assert old_ca in bundle and new_ca in bundle  # both trusted until --drop-old-ca


def test_a_token_of_serve_reads_nodes_but_can_neither_rewrite_its_webhooks_nor_its_secret(
    controlplane: ControlPlane, installed: None, tmp_path: Path
) -> None:
    """What a compromised replica could do with its ServiceAccount's token. It may `get`
    a Secret by name (the key names of those a pod takes whole are judged at the pod's
    CREATE), but never list them, nor write one."""
    serve_kubeconfig = kubeconfig_of(controlplane, "gpu-admission", tmp_path / "serve.kubeconfig")
    serve = Cluster(controlplane.kubectl_binary, serve_kubeconfig, tmp_path / "kubectl-cache")
    fail_open = json.dumps(
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Ignore"}]
    )
    before = secret_data(controlplane, TLS_SECRET)

    nodes = serve.kubectl("get", "nodes", check=False)
    rewrite = serve.kubectl(
        "patch", "mutatingwebhookconfiguration", "gpu-admission", "--type=json", f"--patch={fail_open}",
        check=False,
    )  # fmt: skip
    listed = serve.kubectl("get", "secrets", "--namespace", NAMESPACE, check=False)
    renewal = rotate_as(serve_kubeconfig, "--force")

    assert nodes.returncode == 0, nodes.stderr
    assert rewrite.returncode != 0 and "Forbidden" in rewrite.stderr, rewrite.stderr
    assert listed.returncode != 0 and "Forbidden" in listed.stderr, listed.stderr
    assert renewal.returncode == 1
    assert renewal.stderr.startswith(
        "gpu-admission certs rotate: forbidden (403): "
        "user system:serviceaccount:gpu-admission:gpu-admission may not "
    )
    assert secret_data(controlplane, TLS_SECRET) == before
    hook = controlplane.get_json("mutatingwebhookconfiguration", "gpu-admission")["webhooks"][0]
    assert hook["failurePolicy"] == "Fail"


def test_uninstall_removes_the_webhook_configurations_first_then_everything_else(
    controlplane: ControlPlane, installed: None
) -> None:
    result = gpu_admission(controlplane, "uninstall", "--keep-priority-classes")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "deleted the webhook configurations gpu-admission"
    assert not controlplane.exists("mutatingwebhookconfiguration", "gpu-admission")
    assert not controlplane.exists("clusterrole", "gpu-admission")
    assert not controlplane.exists("clusterrole", ROTATION)
    assert controlplane.exists("priorityclass", "training-priority")
    wait_until_gone(controlplane)
