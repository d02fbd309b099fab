"""The real `gpu-admission serve` process, registered with a control plane.

The service runs as a child process over TLS with a CA made for the test run,
and is registered through the project's own webhook_config and kube modules,
the same code that installs it into a real cluster.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509

from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.kube.client import api_client, apply_webhook_configurations
from webhook.policy import load_policy_file
from webhook.policy.load import load_default_policy
from webhook.tls.files import write_key_pair
from webhook.tls.pki import ca_bundle as encode_ca_bundle
from webhook.tls.pki import create_ca, issue_serving_certificate

from ..secret_volume import SecretVolume
from .ports import free_ports
from .processes import Component

START_TIMEOUT = 30.0
# Generous for a 2-core machine running a whole control plane; the shipped
# configuration uses 3 s (see webhook_config).
WEBHOOK_TIMEOUT_SECONDS = 10


class WebhookServer:
    def __init__(self, work_dir: Path) -> None:
        self.work_dir = work_dir
        self.port = free_ports(1)[0]
        ca = create_ca("gpu-admission e2e CA")
        serving = issue_serving_certificate(
            ca, "gpu-admission", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
        )
        pki = work_dir / "pki"
        self.ca_path, _ = write_key_pair(pki, "ca", ca)
        self.cert_path, self.key_path = write_key_pair(pki, "serving", serving)
        self.ca_bundle = encode_ca_bundle(ca.certificate)
        self.policy_path: Path | None = None
        self._component: Component | None = None
        self._starts = 0
        self._volume: SecretVolume | None = None
        self._trusted = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(
        self,
        policy: Path | None = None,
        reload_interval: float | None = None,
        kubeconfig: Path | None = None,
        metrics_port: int = 0,
        apiserver_sources: Sequence[str] = (),
    ) -> None:
        """Start serving `policy` (default: the embedded one) and wait for /healthz;
        `reload_interval` sets how often the policy and certificate files are polled;
        `kubeconfig` turns the live inventory of that cluster on; `metrics_port`, when
        given, serves /metrics there; `apiserver_sources` are kube-apiserver's addresses."""
        self.stop()
        self.policy_path = policy
        command = [
            sys.executable,
            "-m",
            "webhook.cli",
            "serve",
            "--port",
            str(self.port),
            "--tls-cert",
            str(self.cert_path),
            "--tls-key",
            str(self.key_path),
            # Tests may run several servers at once; only one asking for it is scraped.
            "--metrics-port",
            str(metrics_port),
        ]
        if policy is not None:
            command += ["--policy", str(policy)]
        if reload_interval is not None:
            command += ["--reload-interval", str(reload_interval)]
        if kubeconfig is not None:
            command += ["--kubeconfig", str(kubeconfig)]
        for source in apiserver_sources:
            command += ["--apiserver-source", source]
        self._starts += 1
        component = Component(
            "gpu-admission", command, self.work_dir / f"gpu-admission-{self._starts}.log"
        )
        component.start()
        self._component = component
        component.wait_healthy(self._healthy, START_TIMEOUT)

    @contextlib.contextmanager
    def serving(
        self,
        cluster: Path,
        policy: Path | None = None,
        *,
        reload_interval: float | None = None,
        kubeconfig: Path | None = None,
        metrics_port: int = 0,
        apiserver_sources: Sequence[str] = (),
    ) -> Iterator[WebhookServer]:
        """Serve `policy` (with `start`'s options), registered with the cluster whose
        admin kubeconfig is `cluster`; then the embedded policy again, as the session's
        other tests expect."""
        self.start(
            policy,
            reload_interval=reload_interval,
            kubeconfig=kubeconfig,
            metrics_port=metrics_port,
            apiserver_sources=apiserver_sources,
        )
        self.register(cluster)
        try:
            yield self
        finally:
            self.start(None)
            self.register(cluster)

    @contextlib.contextmanager
    def paused(self) -> Iterator[WebhookServer]:
        """The process stopped (SIGSTOP) and then continued: its connections stay open and
        nothing answers, so kube-apiserver waits out each call's timeout, the worst
        outage there is."""
        pid = self._component.pid if self._component is not None else None
        if pid is None:
            raise RuntimeError("gpu-admission is not running")
        os.kill(pid, signal.SIGSTOP)
        try:
            yield self
        finally:
            os.kill(pid, signal.SIGCONT)

    def kill(self) -> None:
        """The process killed (SIGKILL): nothing listens on its port any more, and it
        had no chance to say goodbye to its connections."""
        if self._component is not None:
            self._component.kill()
            self._component = None

    def stop(self) -> None:
        if self._component is not None:
            self._component.stop()
            self._component = None

    def log(self) -> str:
        return self._component.log_tail(200) if self._component else ""

    def register(self, kubeconfig: Path, timeout_seconds: int = WEBHOOK_TIMEOUT_SECONDS) -> None:
        """Create or replace the webhook configurations pointing at this process, each
        webhook with `timeout_seconds` (the tests' generous default; the demo's are the
        shipped configurations' 3 s)."""
        policy = load_policy_file(self.policy_path) if self.policy_path else load_default_policy()
        mutating, validating = render_webhook_configurations(
            policy,
            Endpoint(ca_bundle=self.ca_bundle, url=self.url),
            timeout_seconds=timeout_seconds,
        )
        api = api_client(kubeconfig)
        try:
            apply_webhook_configurations(api, mutating, validating)
        finally:
            api.close()

    def use_secret_volume(self) -> SecretVolume:
        """Serve the current pair from a directory laid out like a Secret volume.

        Restarts the process with --tls-cert/--tls-key pointing into the volume; from
        then on ``SecretVolume.update`` is how kubelet would deliver a renewed Secret.
        Calling it again returns the same volume without a restart.
        """
        if self._volume is None:
            self._volume = SecretVolume(
                self.work_dir / "secret-volume",
                {"tls.crt": self.cert_path.read_bytes(), "tls.key": self.key_path.read_bytes()},
            )
            self.cert_path = self._volume.path("tls.crt")
            self.key_path = self._volume.path("tls.key")
            self.start(self.policy_path)
        return self._volume

    def trust(self, ca_pem: bytes) -> None:
        """Make ``ca_pem`` (one or more CAs) what ``register`` puts in caBundle and what
        the health check trusts, after the CA behind the served certificate changed."""
        self._trusted += 1
        self.ca_path = self.work_dir / "pki" / f"trusted-{self._trusted}.crt"
        self.ca_path.write_bytes(ca_pem)
        self.ca_bundle = base64.b64encode(ca_pem).decode("ascii")

    def served_certificate(self) -> x509.Certificate:
        """The certificate a new connection is served now, whoever issued it."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw,
            context.wrap_socket(raw) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        if der is None:
            raise RuntimeError("the webhook presented no certificate")
        return x509.load_der_x509_certificate(der)

    def readiness(self) -> dict[str, Any]:
        """The /readyz document (its checks and their details)."""
        context = ssl.create_default_context(cafile=str(self.ca_path))
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=5, context=context) as r:
                document: dict[str, Any] = json.loads(r.read())
        except urllib.error.HTTPError as error:  # 503: not ready, same document
            document = json.loads(error.read())
        return document

    def _healthy(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.ca_path))
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2, context=context) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False
