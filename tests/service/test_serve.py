"""The real server (webhook/service/serve.py via `python -m webhook.cli serve`) over HTTPS.

Each server is a subprocess on a free port; clients verify its certificate
against the CA that issued it, and post reviews the way kube-apiserver does.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from tests.builders import container, pod
from tests.conftest import Pki
from webhook.engine import Engine
from webhook.http.metrics import Metrics
from webhook.service import serve
from webhook.tls.files import write_key_pair
from webhook.tls.pki import create_ca

REPOSITORY = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 30.0
Review = Callable[..., dict[str, Any]]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def trusting(ca_cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca_cert))


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    port: int
    log_path: Path
    metrics_url: str = ""

    def log(self) -> str:
        return self.log_path.read_text("utf-8")

    def log_entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log().splitlines() if line.startswith("{")]


def start(args: list[str], cache: Path, log_path: Path) -> Server:
    """`gpu-admission serve ARGS` on a free port and its metrics on another, with
    XDG_CACHE_HOME at `cache`."""
    port, metrics_port = free_port(), free_port()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    command = [sys.executable, "-m", "webhook.cli", "serve", "--port", str(port)]
    command += ["--metrics-port", str(metrics_port), *args]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=REPOSITORY, env=env, stdout=log, stderr=subprocess.STDOUT
        )
    metrics_url = f"http://127.0.0.1:{metrics_port}"
    return Server(process, f"https://127.0.0.1:{port}", port, log_path, metrics_url)


def wait_until_healthy(server: Server, ca_cert: Callable[[], Path]) -> None:
    """Poll /healthz over verified HTTPS; fail with the server's log if it never answers."""
    deadline = time.monotonic() + STARTUP_SECONDS
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"server exited with {server.process.returncode}:\n{server.log()}")
        if ca_cert().exists():
            try:
                reply = httpx.get(f"{server.url}/healthz", verify=trusting(ca_cert()), timeout=2)
            except (httpx.TransportError, ssl.SSLError) as error:
                last = error
            else:
                if reply.status_code == 200:
                    return
        time.sleep(0.1)
    pytest.fail(f"server not healthy after {STARTUP_SECONDS}s ({last!r}):\n{server.log()}")


def stop(server: Server) -> int:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
    return server.process.returncode


@contextmanager
def serving(
    args: list[str], cache: Path, log_path: Path, ca_cert: Callable[[], Path]
) -> Iterator[Server]:
    server = start(args, cache, log_path)
    try:
        wait_until_healthy(server, ca_cert)
        yield server
    finally:
        stop(server)


@pytest.fixture(scope="module")
def server(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("server")
    args = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    with serving(args, directory / "cache", directory / "server.log", lambda: pki.ca_cert) as up:
        yield up


def post_review(server: Server, pki: Pki, endpoint: str, review: dict[str, Any]) -> Any:
    """POST as kube-apiserver does: JSON body, `?timeout=` query, verified TLS."""
    reply = httpx.post(
        f"{server.url}{endpoint}",
        params={"timeout": "10s"},
        content=json.dumps(review).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, */*"},
        verify=trusting(pki.ca_cert),
        timeout=10,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    return body["response"]


class TestServingWithAGivenCertificate:
    def test_healthz_and_readyz_answer_over_https_verified_against_the_ca(
        self, server: Server, pki: Pki
    ) -> None:
        with httpx.Client(verify=trusting(pki.ca_cert)) as client:
            healthz = client.get(f"{server.url}/healthz")
            readyz = client.get(f"{server.url}/readyz")

        assert (healthz.status_code, healthz.json()) == (200, {"status": "ok"})
        assert readyz.status_code == 200
        assert readyz.json()["ready"] is True
        checks = readyz.json()["checks"]
        assert checks["policy"] == {"ok": True, "detail": "policies/default.yaml (embedded)"}
        assert checks["certificate"]["ok"] is True
        assert "expires at" in checks["certificate"]["detail"]

    def test_the_certificate_is_valid_for_localhost_too(self, server: Server, pki: Pki) -> None:
        with httpx.Client(verify=trusting(pki.ca_cert)) as client:
            reply = client.get(f"{server.url}/healthz", extensions={"sni_hostname": "localhost"})

        assert reply.status_code == 200

    def test_validate_denies_a_gpu_pod_without_a_class_posted_like_kube_apiserver(
        self, server: Server, pki: Pki, review: Review
    ) -> None:
        sent = review(pod(containers=[container(gpus=1)], name="trainer"), uid="serve-deny-1")

        response = post_review(server, pki, "/validate", sent)

        assert response["uid"] == "serve-deny-1"
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        assert response["status"]["reason"] == "Forbidden"
        assert "no label gpu-admission.io/workload" in response["status"]["message"]

    def test_a_denial_is_logged_as_one_json_line_with_the_uid(
        self, server: Server, pki: Pki, review: Review
    ) -> None:
        sent = review(pod(containers=[container(gpus=1)]), uid="serve-deny-logged")

        post_review(server, pki, "/validate", sent)

        [entry] = [e for e in server.log_entries() if e.get("uid") == "serve-deny-logged"]
        assert entry["message"] == "denied"
        assert entry["level"] == "info"
        assert entry["rules"] == ["workload-class"]

    def test_mutate_answers_an_inference_pod_with_a_patch_that_applies(
        self, server: Server, pki: Pki, review: Review
    ) -> None:
        sent_pod = pod("inference")

        response = post_review(server, pki, "/mutate", review(sent_pod, uid="serve-mutate-1"))

        assert (response["uid"], response["allowed"]) == ("serve-mutate-1", True)
        assert response["patchType"] == "JSONPatch"
        operations = json.loads(base64.b64decode(response["patch"]))
        patched = jsonpatch.apply_patch(sent_pod, operations)
        assert patched["spec"]["priorityClassName"] == "inference-priority"
        assert patched["spec"]["priority"] == 1000000

    def test_validate_allows_the_mutated_pod(
        self, server: Server, pki: Pki, review: Review
    ) -> None:
        sent_pod = pod("training", containers=[container(gpus=4)])
        mutation = post_review(server, pki, "/mutate", review(sent_pod))
        patched = jsonpatch.apply_patch(sent_pod, json.loads(base64.b64decode(mutation["patch"])))

        response = post_review(server, pki, "/validate", review(patched, uid="serve-ok-1"))

        assert response == {"uid": "serve-ok-1", "allowed": True}

    def test_a_body_that_is_not_a_review_gets_400_from_the_real_server(
        self, server: Server, pki: Pki
    ) -> None:
        reply = httpx.post(
            f"{server.url}/validate?timeout=10s",
            content=b"[]",
            headers={"Content-Type": "application/json"},
            verify=trusting(pki.ca_cert),
        )

        assert reply.status_code == 400
        assert reply.json() == {"error": "body is not a JSON object"}

    def test_a_client_that_trusts_another_ca_fails_the_handshake(
        self, server: Server, tmp_path: Path
    ) -> None:
        other_ca, _ = write_key_pair(tmp_path, "other-ca", create_ca("some other CA"))

        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{server.url}/healthz", verify=trusting(other_ca))


def test_sigterm_shuts_the_server_down_gracefully_and_frees_the_port(
    pki: Pki, tmp_path: Path
) -> None:
    args = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    with serving(args, tmp_path / "cache", tmp_path / "server.log", lambda: pki.ca_cert) as up:
        pass  # up and healthy; leaving the block sends SIGTERM

    assert up.process.returncode in (0, -signal.SIGTERM), up.log()
    assert "Finished server process" in up.log()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", up.port)) != 0


def test_without_a_certificate_serve_generates_dev_certificates_in_xdg_cache_home(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    dev_certs = cache / "gpu-admission" / "dev-certs"

    with serving([], cache, tmp_path / "server.log", lambda: dev_certs / "ca.crt") as up:
        reply = httpx.get(f"{up.url}/readyz", verify=trusting(dev_certs / "ca.crt"))
        entries = up.log_entries()

    assert reply.status_code == 200
    assert sorted(p.name for p in dev_certs.glob("*.*") if not p.name.startswith(".")) == [
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
    ]
    [warning] = [e for e in entries if e["level"] == "warning"]
    assert warning["certificate"] == str(dev_certs / "tls.crt")
    assert warning["ca"] == str(dev_certs / "ca.crt")


def test_a_broken_policy_exits_2_naming_file_path_and_reason_without_starting(
    tmp_path: Path,
) -> None:
    text = (REPOSITORY / "policies" / "default.yaml").read_text("utf-8")
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("pools: [training]", "pools: [trainig]"), "utf-8")
    cache = tmp_path / "cache"

    finished = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "serve", "--policy", str(broken), "--port", "0"],
        cwd=REPOSITORY,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    line = broken.read_text("utf-8").splitlines().index("    pools: [trainig]") + 1
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        f"gpu-admission: refusing to serve a broken policy: {broken}:{line}: "
        "classes.training.pools[0]: unknown pool 'trainig'; pools: inference, training\n"
    )
    assert not cache.exists(), "no development certificate is made for a server that never runs"


class TestTheEdge:
    """What the server does with clients that misbehave or go away (the limits
    themselves are tested in tests/http/test_limits.py with shorter timeouts)."""

    def test_metrics_are_served_in_plain_http_on_their_own_port_and_not_on_the_webhook_port(
        self, server: Server, pki: Pki
    ) -> None:
        metrics = httpx.get(f"{server.metrics_url}/metrics", timeout=10)
        on_webhook_port = httpx.get(f"{server.url}/metrics", verify=trusting(pki.ca_cert))

        assert metrics.status_code == 200
        assert "gpu_admission_requests_total" in metrics.text
        assert "gpu_admission_connections_cut_total" in metrics.text
        assert on_webhook_port.status_code == 404

    @pytest.mark.parametrize(
        "ciphers",
        ["ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"],
    )
    def test_a_tls_1_2_client_offering_an_aead_suite_is_served(
        self, server: Server, pki: Pki, ciphers: str
    ) -> None:
        with handshake(server, pki, ciphers) as connection:
            assert connection.version() == "TLSv1.2"
            assert connection.cipher()[0] == ciphers

    # The two CBC suites OpenSSL's defaults serve over TLS 1.2 to an ECDSA certificate.
    @pytest.mark.parametrize("ciphers", ["ECDHE-ECDSA-AES256-SHA384", "ECDHE-ECDSA-AES128-SHA256"])
    def test_a_tls_1_2_client_offering_only_a_cbc_suite_fails_the_handshake(
        self, server: Server, pki: Pki, ciphers: str
    ) -> None:
        with pytest.raises(ssl.SSLError):  # noqa: SIM117
            with handshake(server, pki, ciphers):
                pass

    def test_an_upload_the_client_abandons_is_no_error_of_ours(
        self, server: Server, pki: Pki
    ) -> None:
        head = b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n"
        for _ in range(3):
            with handshake(server, pki, "ECDHE-ECDSA-AES128-GCM-SHA256") as connection:
                connection.sendall(head + b"{" * 50000)
        with httpx.Client(verify=trusting(pki.ca_cert)) as client:
            assert client.get(f"{server.url}/healthz").status_code == 200  # the server is fine

        bad = [e for e in server.log_entries() if e["level"] in ("error", "critical")]
        assert bad == [], bad
        assert "Traceback" not in server.log()


@contextmanager
def handshake(server: Server, pki: Pki, ciphers: str) -> Iterator[ssl.SSLSocket]:
    """A TLS 1.2 connection offering only `ciphers`, verified against the test CA."""
    context = trusting(pki.ca_cert)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(ciphers)
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as connection,
    ):
        yield connection


def test_sigterm_closes_idle_keep_alive_connections_at_once_instead_of_waiting_them_out(
    pki: Pki, tmp_path: Path
) -> None:
    args = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    with (
        serving(args, tmp_path / "cache", tmp_path / "server.log", lambda: pki.ca_cert) as up,
        httpx.Client(verify=trusting(pki.ca_cert)) as kept_alive,
    ):
        assert kept_alive.get(f"{up.url}/healthz").status_code == 200
        with handshake(up, pki, "ECDHE-ECDSA-AES128-GCM-SHA256") as silent:
            silent.sendall(b"GET /healthz HTTP/1.1\r\n")  # half a request head
            stop(up)  # SIGTERM while both connections are open

    assert up.process.returncode in (0, -signal.SIGTERM), up.log()
    assert "Finished server process" in up.log()
    assert "timeout graceful shutdown exceeded" not in up.log()
    assert [e for e in up.log_entries() if e["level"] == "error"] == []


def test_a_metrics_port_in_use_costs_the_metrics_not_the_admission_service(
    pki: Pki, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--metrics-port", str(port)]
        log_path = tmp_path / "server.log"
        with serving(args, tmp_path / "cache", log_path, lambda: pki.ca_cert) as up:
            reply = httpx.get(f"{up.url}/healthz", verify=trusting(pki.ca_cert))

    assert reply.status_code == 200
    [error] = [e for e in up.log_entries() if e["level"] == "error"]
    assert error["message"] == "serving no metrics: their port cannot be bound"
    assert error["port"] == port


def test_the_audit_of_a_replica_skips_the_namespace_it_runs_in(
    monkeypatch: pytest.MonkeyPatch, engine: Engine
) -> None:
    """The Deployment sets POD_NAMESPACE from the downward API: the chart's release
    namespace, whatever its name, is the one the webhooks never cover."""
    monkeypatch.setenv("POD_NAMESPACE", "platform-admission")
    settings = serve.ServeSettings(audit_interval=60.0)

    audit = serve._periodic_audit(settings, None, lambda: engine, None, Metrics())

    assert audit is not None
    assert audit.service_namespace == "platform-admission"
