"""`gpu-admission install` and `uninstall` against the real kube-apiserver.

Without a kubelet the Deployment never becomes available, so install runs
with `--wait 0`; what is proven is what the apiserver accepts and stores:
every object of the base, the certificates, and webhook configurations whose
caBundle verifies the serving certificate for the Service's DNS name, the way
kube-apiserver will verify it.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

from webhook.certs import certificates_from_pem
from webhook.install import NAMESPACE, TLS_SECRET

from .controlplane import ControlPlane
from .webhook_server import WebhookServer

SERVICE_DNS = "gpu-admission.gpu-admission.svc"


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
        ("deployment", "gpu-admission", NAMESPACE),
        ("service", "gpu-admission", NAMESPACE),
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


def test_uninstall_removes_the_webhook_configurations_first_then_everything_else(
    controlplane: ControlPlane, installed: None
) -> None:
    result = gpu_admission(controlplane, "uninstall", "--keep-priority-classes")

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "deleted the webhook configurations gpu-admission"
    assert not controlplane.exists("mutatingwebhookconfiguration", "gpu-admission")
    assert not controlplane.exists("clusterrole", "gpu-admission")
    assert controlplane.exists("priorityclass", "training-priority")
    wait_until_gone(controlplane)
