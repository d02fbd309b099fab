"""Certificate rotation while kube-apiserver keeps creating pods through the webhook.

The serving certificate lives where a cluster keeps it: a ``kubernetes.io/tls`` Secret
(and the CA in ``<name>-ca``), rotated by ``gpu-admission certs rotate`` through the
real apiserver. There is no kubelet, so the test plays its part: it copies the Secret
into a directory laid out like a Secret volume with kubelet's symlink swap, and the
running ``gpu-admission serve`` reloads from there. Meanwhile a thread creates pods
labelled as workloads, each of which kube-apiserver sends through both webhooks; not
one creation may fail.

kube-apiserver keeps connections to the webhook alive, and a live connection keeps
the certificate of its handshake. So after each swap the load goes quiet for longer
than the server's keep-alive timeout: the pods created after that are proof that new
handshakes with the new certificate are accepted too.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.names import WEBHOOK_CONFIGURATION as NAME
from webhook.kube.client import api_client
from webhook.policy import load_default_policy
from webhook.tls.pki import certificates_from_pem, decode_ca_bundle, is_issued_by

from ..secret_volume import SecretVolume
from .controlplane import ControlPlane
from .waiting import wait_for
from .webhook_server import WebhookServer

REPO = Path(__file__).resolve().parents[2]
SECRET = "gpu-admission-tls"
CA_SECRET = f"{SECRET}-ca"
WORKLOAD = {"gpu-admission.io/workload": "inference"}
# uvicorn closes a connection idle for 5 s; quiet for longer, kube-apiserver must
# open new connections, which are served the certificate loaded now.
QUIET_SECONDS = 7.0
RELOAD_TIMEOUT = 60.0  # the server polls every 5 s; generous for two busy cores
WEBHOOKS = sum(
    len(configuration["webhooks"])
    for configuration in render_webhook_configurations(
        load_default_policy(), Endpoint("x", url="u")
    )
)
"""Every webhook of both configurations: each carries the caBundle a rotation updates."""
COMMAND_TIMEOUT = 180.0


@dataclass
class PodLoad:
    """Creates workload pods one after another until stopped, deleting each at once.

    A creation counts only if kube-apiserver answered with the pod mutated by our
    webhook (its priority class set); anything else is a failure.
    """

    kubeconfig: Path
    namespace: str
    created: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    quiet: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        api = api_client(self.kubeconfig)
        pods = client.CoreV1Api(api)
        number = 0
        try:
            while not self.stop.is_set():
                if self.quiet.is_set():
                    time.sleep(0.1)
                    continue
                number += 1
                self._create_and_delete(pods, f"rotation-{number}")
                time.sleep(0.05)
        finally:
            api.close()

    def _create_and_delete(self, pods: Any, name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": WORKLOAD},
            "spec": {"containers": [{"name": "server", "image": "registry.example/llm:1.0"}]},
        }
        try:
            response = pods.create_namespaced_pod(self.namespace, body, _preload_content=False)
        except ApiException as error:
            self.failures.append(f"{name}: {error.status} {error.body}")
            return
        except Exception as error:  # a broken connection is a failed creation too
            self.failures.append(f"{name}: {error!r}")
            return
        pod = json.loads(response.data)
        if pod["spec"].get("priorityClassName") != "inference-priority":
            self.failures.append(f"{name} was created without our mutation")
        else:
            self.created += 1
        with contextlib.suppress(ApiException):  # the namespace goes after the test anyway
            pods.delete_namespaced_pod(
                name, self.namespace, grace_period_seconds=0, _preload_content=False
            )

    def wait_for_more(self, count: int, timeout: float = 60.0) -> None:
        target = self.created + count
        wait_for(
            lambda: self.created >= target or None,
            timeout,
            f"{count} more pods to be created (failures so far: {self.failures[:3]})",
        )

    def go_quiet(self) -> None:
        """Pause long enough for every kept-alive connection to the webhook to close."""
        self.quiet.set()
        time.sleep(QUIET_SECONDS)
        self.quiet.clear()


@pytest.fixture
def load(controlplane: ControlPlane, opted_in: str) -> Iterator[PodLoad]:
    pod_load = PodLoad(controlplane.kubeconfig, opted_in)
    thread = threading.Thread(target=pod_load.run, name="pod-load", daemon=True)
    thread.start()
    try:
        pod_load.wait_for_more(3)
        yield pod_load
    finally:
        pod_load.stop.set()
        thread.join(timeout=60)


@dataclass
class Pki:
    """The Secrets of the webhook in the test's namespace, and the volume it serves."""

    controlplane: ControlPlane
    admission: WebhookServer
    namespace: str
    volume: SecretVolume

    def secret(self, name: str) -> dict[str, bytes]:
        data = self.controlplane.get_json("secret", name, self.namespace)["data"]
        return {key: base64.b64decode(value) for key, value in data.items()}

    def deliver(self) -> x509.Certificate:
        """What kubelet does after the Secret changed: swap the new files in. Returns
        the leaf now in the Secret."""
        data = self.secret(SECRET)
        self.volume.update({"tls.crt": data["tls.crt"], "tls.key": data["tls.key"]})
        return certificates_from_pem(data["tls.crt"])[0]

    def wait_until_served(self, leaf: x509.Certificate) -> None:
        wait_for(
            lambda: self.admission.served_certificate().serial_number == leaf.serial_number,
            RELOAD_TIMEOUT,
            f"the webhook to serve serial {leaf.serial_number:x}",
            interval=0.5,
            describe_last=self.admission.log,
        )

    def ca_bundles(self) -> list[list[x509.Certificate]]:
        bundles = []
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            configuration = self.controlplane.get_json(kind, NAME)
            for webhook in configuration["webhooks"]:
                bundles.append(decode_ca_bundle(webhook["clientConfig"]["caBundle"]))
        return bundles

    def rotate(self, *flags: str) -> str:
        where = ["--kubeconfig", str(self.controlplane.kubeconfig), "--namespace", self.namespace]
        finished = subprocess.run(
            [
                sys.executable,
                "-m",
                "webhook.cli",
                "certs",
                "rotate",
                *where,
                "--secret",
                SECRET,
                *flags,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
        assert finished.returncode == 0, finished.stderr
        return finished.stdout


def _create_secret(controlplane: ControlPlane, namespace: str, name: str, **kwargs: Any) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        **kwargs,
    }
    controlplane.apply(json.dumps(secret), namespace=namespace)


def _encoded(files: dict[str, bytes]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode("ascii") for key, value in files.items()}


@pytest.fixture
def pki(controlplane: ControlPlane, admission: WebhookServer, opted_in: str) -> Iterator[Pki]:
    """The session's webhook serving from a Secret volume, its pair and CA in Secrets.

    Afterwards the webhook serves its original pair again and the webhook
    configurations trust its original CA, whatever the test left behind.
    """
    volume = admission.use_secret_volume()
    original_pair = {"tls.crt": volume.path("tls.crt").read_bytes()}
    original_pair["tls.key"] = volume.path("tls.key").read_bytes()
    original_ca = admission.ca_path.read_bytes()
    ca_key = (admission.work_dir / "pki" / "ca.key").read_bytes()
    _create_secret(
        controlplane,
        opted_in,
        SECRET,
        type="kubernetes.io/tls",
        data=_encoded({**original_pair, "ca.crt": original_ca}),
    )
    _create_secret(
        controlplane, opted_in, CA_SECRET, data=_encoded({"ca.crt": original_ca, "ca.key": ca_key})
    )
    setup = Pki(controlplane, admission, opted_in, volume)
    try:
        yield setup
    finally:
        admission.trust(original_ca)
        admission.register(controlplane.kubeconfig)
        volume.update(original_pair)
        setup.wait_until_served(certificates_from_pem(original_pair["tls.crt"])[0])
        _wait_until_admitted(controlplane, opted_in)


def _wait_until_admitted(controlplane: ControlPlane, namespace: str) -> None:
    """Until kube-apiserver sends pods through the restored configuration again."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "after-rotation", "labels": WORKLOAD},
        "spec": {"containers": [{"name": "server", "image": "registry.example/llm:1.0"}]},
    }
    wait_for(
        lambda: (
            controlplane.apply(
                json.dumps(pod), namespace=namespace, dry_run="server", check=False
            ).returncode
            == 0
        ),
        60.0,
        "a pod to be admitted through the restored webhook configuration",
        interval=1.0,
    )


def test_a_leaf_renewed_from_the_same_ca_loses_no_pod_creation(
    pki: Pki, load: PodLoad, admission: WebhookServer
) -> None:
    before = admission.served_certificate()

    report = pki.rotate("--force")
    renewed = pki.deliver()
    pki.wait_until_served(renewed)
    load.wait_for_more(3)
    load.go_quiet()
    load.wait_for_more(5)

    assert "renewing the leaf: forced" in report
    assert renewed.serial_number != before.serial_number
    assert renewed.issuer == before.issuer
    assert load.failures == []
    assert admission.served_certificate() == renewed
    assert [len(bundle) for bundle in pki.ca_bundles()] == [1] * WEBHOOKS, "no caBundle change"


def test_a_ca_rotation_with_an_overlap_loses_no_pod_creation(
    pki: Pki, load: PodLoad, admission: WebhookServer
) -> None:
    old_ca = certificates_from_pem(pki.secret(CA_SECRET)["ca.crt"])[0]

    # 1. A new CA, trusted next to the old one, and a leaf from it in the Secret.
    pki.rotate("--rotate-ca", "--propagation-delay", "3")
    new_ca = certificates_from_pem(pki.secret(CA_SECRET)["ca.crt"])[0]
    overlap = pki.ca_bundles()
    load.wait_for_more(3)
    new_leaf = pki.deliver()
    pki.wait_until_served(new_leaf)
    load.go_quiet()  # new connections: the new leaf, trusted through the new CA
    load.wait_for_more(5)

    # 2. Every replica serves the new leaf: only the new CA stays trusted.
    report = pki.rotate("--drop-old-ca")
    admission.trust(pki.secret(CA_SECRET)["ca.crt"])
    load.go_quiet()
    load.wait_for_more(5)

    assert new_ca != old_ca
    assert overlap == [[old_ca, new_ca]] * WEBHOOKS, "every webhook of both configurations"
    assert is_issued_by(new_leaf, new_ca)
    assert "updated, 1 CA(s)" in report
    assert pki.ca_bundles() == [[new_ca]] * WEBHOOKS
    assert load.failures == []
    assert admission.served_certificate() == new_leaf
    trusting_only_the_new_ca = ssl.create_default_context(
        cadata=pki.secret(CA_SECRET)["ca.crt"].decode()
    )
    with (
        socket.create_connection(("127.0.0.1", admission.port), timeout=10) as raw,
        trusting_only_the_new_ca.wrap_socket(raw, server_hostname="127.0.0.1") as verified,
    ):
        assert verified.version() is not None
