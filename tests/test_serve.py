"""The real server (webhook/serve.py via `python -m webhook.cli serve`) over HTTPS.

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
from webhook.certs import create_ca, write_key_pair

REPOSITORY = Path(__file__).resolve().parents[1]
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

    def log(self) -> str:
        return self.log_path.read_text("utf-8")

    def log_entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log().splitlines() if line.startswith("{")]


def start(args: list[str], cache: Path, log_path: Path) -> Server:
    """`gpu-admission serve ARGS` on a free port, with XDG_CACHE_HOME at `cache`."""
    port = free_port()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "webhook.cli", "serve", "--port", str(port), *args],
            cwd=REPOSITORY,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return Server(process, f"https://127.0.0.1:{port}", port, log_path)


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

    assert finished.returncode == 2
    assert finished.stdout == ""
    assert finished.stderr == (
        f"gpu-admission: refusing to serve a broken policy: {broken}: "
        "classes.training.pools[0]: unknown pool 'trainig'; pools: inference, training\n"
    )
    assert not cache.exists(), "no development certificate is made for a server that never runs"
