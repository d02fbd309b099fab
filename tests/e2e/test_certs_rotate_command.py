"""`gpu-admission certs rotate` failing against the real kube-apiserver: what it tells.

A rotation that succeeds is proven elsewhere (test_cert_rotation.py renews the leaf and
rotates the CA while pods are admitted; test_install.py rotates as the CronJob's
ServiceAccount). Here the command finds no serving Secret, or is refused by
kube-apiserver's authorizer: it runs as a user whose client certificate the control
plane's CA issued but whom no RBAC rule grants anything.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.tls.files import load_ca, write_key_pair
from webhook.tls.pki import create_ca, issue_client_certificate, issue_service_certificate
from webhook.tls.secret_layout import serving_secret_data

from .controlplane import ControlPlane
from .kubeconfig import write_kubeconfig
from .pki import KeyPairPaths

REPO = Path(__file__).resolve().parents[2]
NOBODY = "e2e-certs-rotate-nobody"


@pytest.fixture(scope="module")
def namespace(controlplane: ControlPlane) -> Iterator[str]:
    name = controlplane.create_namespace("e2e-certs-rotate")
    try:
        yield name
    finally:
        controlplane.delete_namespace(name, wait=False)


def rotate(
    kubeconfig: Path, namespace: str, secret: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "webhook.cli", "certs", "rotate",
            "--kubeconfig", str(kubeconfig), "--namespace", namespace, "--secret", secret,
            "--propagation-delay", "0", *flags,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip


def kubeconfig_of_nobody(controlplane: ControlPlane, directory: Path) -> Path:
    """A kubeconfig for ``NOBODY``, authenticated by a client certificate of the cluster's CA."""
    ca = load_ca(controlplane.pki.ca.cert, controlplane.pki.ca.key)
    pair = write_key_pair(directory, "nobody", issue_client_certificate(ca, NOBODY, days=1))
    return write_kubeconfig(
        directory / "nobody.kubeconfig",
        server=controlplane.api_url,
        ca_cert=controlplane.ca_path,
        client=KeyPairPaths(*pair),
        user=NOBODY,
    )


def test_rotate_without_the_serving_secret_exits_2_naming_it(
    controlplane: ControlPlane, namespace: str
) -> None:
    finished = rotate(controlplane.kubeconfig, namespace, "absent")

    assert finished.returncode == 2, finished.stderr
    assert finished.stderr.startswith(
        f"gpu-admission certs rotate: the serving Secret {namespace}/absent does not exist: "
    )
    assert finished.stderr.count("\n") == 1
    assert finished.stdout == ""


def test_rotate_refused_by_the_api_server_exits_1_with_its_message_on_one_line(
    controlplane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    ca = create_ca("refused rotation CA")
    data = serving_secret_data(issue_service_certificate(ca, "hook", namespace), ca)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "tls"},
        "type": "kubernetes.io/tls",
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }
    controlplane.apply(json.dumps(secret), namespace=namespace)
    before = controlplane.get_json("secret", "tls", namespace)["data"]

    finished = rotate(kubeconfig_of_nobody(controlplane, tmp_path), namespace, "tls", "--force")

    assert finished.returncode == 1
    assert finished.stderr == (
        f"gpu-admission certs rotate: forbidden (403): user {NOBODY} may not get secrets "
        f"in namespace {namespace} on the API server at {controlplane.api_url}\n"
    )
    assert controlplane.get_json("secret", "tls", namespace)["data"] == before
