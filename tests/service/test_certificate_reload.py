"""The serving certificate is reloaded from a Secret volume without a failed request.

Unit tests drive ``CertificateReloader.poll`` against files laid out like a Secret
volume and look at what the TLS context serves through an in-memory handshake. The
last tests run the real server (``python -m webhook.cli serve``) while a client opens a
new verified connection for every request and the volume is swapped under it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.secret_volume import SecretVolume
from tests.service.test_serve import Server, serving
from webhook.service import certificate_reload as tls_reload
from webhook.service.certificate_reload import CertificateReloader, InvalidKeyPair, KeyPairFiles
from webhook.tls.pki import (
    CertificateAuthority,
    IssuedCertificate,
    create_ca,
    issue_serving_certificate,
)

RELOAD_SECONDS = 30.0  # the server polls every 5 s; generous for a busy 2-core machine


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return create_ca("reload test CA")


def leaf(ca: CertificateAuthority, days: int = 365) -> IssuedCertificate:
    return issue_serving_certificate(
        ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"], days=days
    )


def pair(issued: IssuedCertificate, key_of: IssuedCertificate | None = None) -> dict[str, bytes]:
    """The files of a serving Secret; ``key_of`` puts another pair's key next to the cert."""
    return {"tls.crt": issued.cert_pem(), "tls.key": (key_of or issued).key_pem()}


def files(volume: SecretVolume) -> KeyPairFiles:
    return KeyPairFiles(cert=volume.path("tls.crt"), key=volume.path("tls.key"))


def served_serial(context: ssl.SSLContext, ca: CertificateAuthority) -> int:
    """The serial of the certificate ``context`` presents, from a handshake in memory."""
    client_context = ssl.create_default_context(cadata=ca.cert_pem().decode())
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, to_server, server_hostname="localhost")
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = context.wrap_bio(server_in, server_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for name, side in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(to_server.read())
        to_client.write(server_out.read())
        if all(done.values()):
            break
    der = client.getpeercert(binary_form=True)
    assert der is not None, "the handshake did not complete"
    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def first(ca: CertificateAuthority) -> IssuedCertificate:
    return leaf(ca)


@pytest.fixture
def second(ca: CertificateAuthority) -> IssuedCertificate:
    return leaf(ca)


@pytest.fixture
def volume(tmp_path: Path, first: IssuedCertificate) -> SecretVolume:
    return SecretVolume(tmp_path / "tls", pair(first))


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


# --- one poll at a time ---------------------------------------------------------------------


def test_the_reloader_serves_the_pair_it_starts_with(
    volume: SecretVolume, ca: CertificateAuthority, first: IssuedCertificate
) -> None:
    reloader = CertificateReloader(files(volume))

    assert served_serial(reloader.context, ca) == first.certificate.serial_number
    assert reloader.state.current.serial_number == first.certificate.serial_number
    assert reloader.state.not_after == first.certificate.not_valid_after_utc


def test_a_symlink_swap_is_served_to_new_handshakes_after_the_next_poll(
    volume: SecretVolume,
    ca: CertificateAuthority,
    second: IssuedCertificate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reloader = CertificateReloader(files(volume))
    volume.update(pair(second))

    with caplog.at_level(logging.INFO, "gpu_admission.tls"):
        assert reloader.poll() is True

    assert served_serial(reloader.context, ca) == second.certificate.serial_number
    assert reloader.state.current.serial_number == second.certificate.serial_number
    [record] = [r for r in caplog.records if r.getMessage() == "serving certificate reloaded"]
    assert record.__dict__["not_after"] == second.certificate.not_valid_after_utc.isoformat()
    assert record.__dict__["serial"] == f"{second.certificate.serial_number:x}"


def test_a_poll_without_a_change_loads_nothing(volume: SecretVolume) -> None:
    reloader = CertificateReloader(files(volume))

    assert reloader.poll() is False


def test_a_new_certificate_next_to_the_old_key_is_refused_and_the_old_pair_keeps_serving(
    volume: SecretVolume,
    ca: CertificateAuthority,
    first: IssuedCertificate,
    second: IssuedCertificate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reloader = CertificateReloader(files(volume))
    volume.update(pair(second, key_of=first))

    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        assert reloader.poll() is False
        assert reloader.poll() is False  # the same bad pair is reported once

    assert served_serial(reloader.context, ca) == first.certificate.serial_number
    assert reloader.state.current.serial_number == first.certificate.serial_number
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "still serving the previous one" in record.getMessage()
    assert record.__dict__["reason"] == "the key does not belong to the certificate"


def test_a_half_written_certificate_is_refused_then_loaded_once_complete(
    tmp_path: Path,
    ca: CertificateAuthority,
    first: IssuedCertificate,
    second: IssuedCertificate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Plain files rewritten in place, the way a careless copy would do it.
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(first.cert_pem())
    key.write_bytes(first.key_pem())
    reloader = CertificateReloader(KeyPairFiles(cert, key))

    key.write_bytes(second.key_pem())
    cert.write_bytes(second.cert_pem()[:200])
    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        assert reloader.poll() is False
    assert served_serial(reloader.context, ca) == first.certificate.serial_number
    assert "no readable certificate" in caplog.records[0].__dict__["reason"]

    cert.write_bytes(second.cert_pem())
    assert reloader.poll() is True
    assert served_serial(reloader.context, ca) == second.certificate.serial_number


def test_a_missing_file_is_reported_once_and_the_old_pair_keeps_serving(
    tmp_path: Path,
    ca: CertificateAuthority,
    first: IssuedCertificate,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(first.cert_pem())
    key.write_bytes(first.key_pem())
    reloader = CertificateReloader(KeyPairFiles(cert, key))
    key.unlink()

    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        assert reloader.poll() is False
        assert reloader.poll() is False

    assert served_serial(reloader.context, ca) == first.certificate.serial_number
    [record] = caplog.records
    assert record.__dict__["reason"].startswith("unreadable")


def test_a_pair_that_openssl_refuses_leaves_the_served_pair_in_place(
    tmp_path: Path,
    volume: SecretVolume,
    ca: CertificateAuthority,
    first: IssuedCertificate,
    second: IssuedCertificate,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reloader = CertificateReloader(files(volume))
    real_load = tls_reload._load_into
    first_key = tmp_path / "first.key"
    first_key.write_bytes(first.key_pem())

    def half_load(context: ssl.SSLContext, snapshot: tls_reload.KeyPairSnapshot) -> None:
        if snapshot.cert_pem == second.cert_pem():
            # OpenSSL installs the certificate, then refuses the key: a broken context.
            context.load_cert_chain(volume.path("tls.crt"), first_key)
        real_load(context, snapshot)

    monkeypatch.setattr(tls_reload, "_load_into", half_load)
    volume.update(pair(second))

    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        assert reloader.poll() is False

    assert served_serial(reloader.context, ca) == first.certificate.serial_number
    assert reloader.state.current.serial_number == first.certificate.serial_number
    assert "OpenSSL refused the pair" in caplog.records[0].__dict__["reason"]


def test_the_reloader_refuses_to_start_with_a_mismatched_pair(
    tmp_path: Path, first: IssuedCertificate, second: IssuedCertificate
) -> None:
    volume = SecretVolume(tmp_path / "tls", pair(first, key_of=second))

    with pytest.raises(InvalidKeyPair, match="does not belong"):
        CertificateReloader(files(volume))


def test_the_reload_interval_must_be_positive(volume: SecretVolume) -> None:
    with pytest.raises(ValueError, match="positive"):
        CertificateReloader(files(volume), interval=0)


# --- expiry warnings ------------------------------------------------------------------------


def expiry_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "expires soon" in r.getMessage()]


def test_a_certificate_with_under_30_days_left_is_warned_about_at_start(
    tmp_path: Path, ca: CertificateAuthority, caplog: pytest.LogCaptureFixture
) -> None:
    short = leaf(ca, days=10)
    volume = SecretVolume(tmp_path / "tls", pair(short))

    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        reloader = CertificateReloader(files(volume))
        reloader.poll()  # once per certificate, not on every poll

    [warning] = expiry_warnings(caplog)
    assert warning.levelno == logging.WARNING
    assert warning.__dict__["not_after"] == short.certificate.not_valid_after_utc.isoformat()
    assert 9 * 86400 < warning.__dict__["seconds_left"] <= 10 * 86400


def test_reloading_a_certificate_with_under_30_days_left_warns_again(
    volume: SecretVolume, ca: CertificateAuthority, caplog: pytest.LogCaptureFixture
) -> None:
    reloader = CertificateReloader(files(volume))
    volume.update(pair(leaf(ca, days=20)))

    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        assert reloader.poll() is True

    assert len(expiry_warnings(caplog)) == 1


def test_a_certificate_with_a_year_left_is_not_warned_about(
    volume: SecretVolume, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "gpu_admission.tls"):
        CertificateReloader(files(volume)).poll()

    assert expiry_warnings(caplog) == []


# --- the watcher on an event loop ------------------------------------------------------------


def test_the_watcher_reloads_on_its_own_every_interval(
    volume: SecretVolume, ca: CertificateAuthority, second: IssuedCertificate
) -> None:
    reloader = CertificateReloader(files(volume), interval=0.05)

    async def swap_and_wait() -> int:
        watcher = asyncio.create_task(reloader.watch())
        volume.update(pair(second))
        deadline = time.monotonic() + 10
        while reloader.state.current.serial_number != second.certificate.serial_number:
            assert time.monotonic() < deadline, "the watcher never reloaded"
            await asyncio.sleep(0.02)
        watcher.cancel()
        return served_serial(reloader.context, ca)

    assert asyncio.run(swap_and_wait()) == second.certificate.serial_number


# --- the real server --------------------------------------------------------------------------


def open_connection(port: int, context: ssl.SSLContext) -> http.client.HTTPSConnection:
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    connection.connect()
    return connection


def peer_serial(connection: http.client.HTTPSConnection) -> int:
    assert isinstance(connection.sock, ssl.SSLSocket)
    der = connection.sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def get_healthz(connection: http.client.HTTPSConnection) -> None:
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200, body


def fetch_serial(port: int, context: ssl.SSLContext) -> int:
    connection = open_connection(port, context)
    try:
        serial = peer_serial(connection)
        get_healthz(connection)
        return serial
    finally:
        connection.close()


@pytest.fixture
def server_on_volume(
    tmp_path: Path, volume: SecretVolume, ca: CertificateAuthority
) -> Iterator[Server]:
    ca_cert = tmp_path / "ca.crt"
    ca_cert.write_bytes(ca.cert_pem())
    args = ["--tls-cert", str(volume.path("tls.crt")), "--tls-key", str(volume.path("tls.key"))]
    with serving(args, tmp_path / "cache", tmp_path / "server.log", lambda: ca_cert) as up:
        yield up


@dataclass
class ClientLoop:
    """Requests /healthz until stopped: over a new verified connection each time, or
    over one kept-alive connection (a request in flight across the reload)."""

    port: int
    context: ssl.SSLContext
    one_connection: bool = False
    serials: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        kept: http.client.HTTPSConnection | None = None
        while not self.stop.is_set():
            try:
                if self.one_connection:
                    kept = kept or open_connection(self.port, self.context)
                    get_healthz(kept)
                    self.serials.append(peer_serial(kept))
                else:
                    self.serials.append(fetch_serial(self.port, self.context))
            except (OSError, http.client.HTTPException, AssertionError) as error:
                self.failures.append(repr(error))
            time.sleep(0.3 if self.one_connection else 0.02)
        if kept is not None:
            kept.close()

    def wait_for(self, serial: int, timeout: float = RELOAD_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while serial not in self.serials[-3:]:
            assert time.monotonic() < deadline, f"never served serial {serial:x}"
            time.sleep(0.1)


@contextmanager
def running(*loops: ClientLoop) -> Iterator[None]:
    threads = [threading.Thread(target=loop.run, daemon=True) for loop in loops]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for loop in loops:
            loop.stop.set()
        for thread in threads:
            thread.join(timeout=30)


def wait_for_log(server: Server, message: str, timeout: float = RELOAD_SECONDS) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in server.log_entries() if e["message"] == message]
        if found:
            return found[0]
        time.sleep(0.2)
    pytest.fail(f"no {message!r} in the server log:\n{server.log()}")


def test_the_server_swaps_certificates_under_load_without_a_failed_request(
    server_on_volume: Server,
    volume: SecretVolume,
    ca: CertificateAuthority,
    first: IssuedCertificate,
    second: IssuedCertificate,
) -> None:
    context = ssl.create_default_context(cadata=ca.cert_pem().decode())
    fresh = ClientLoop(server_on_volume.port, context)
    kept_alive = ClientLoop(server_on_volume.port, context, one_connection=True)
    old, new = first.certificate.serial_number, second.certificate.serial_number

    with running(fresh, kept_alive):
        fresh.wait_for(old)
        volume.update(pair(second, key_of=first))  # the new certificate, the old key
        refused = wait_for_log(
            server_on_volume,
            "not reloading the serving certificate: still serving the previous one",
        )
        served_after_refusal = fetch_serial(server_on_volume.port, context)
        volume.update(pair(second))
        fresh.wait_for(new)
        time.sleep(1)

    assert refused["reason"] == "the key does not belong to the certificate"
    assert served_after_refusal == old
    assert fresh.failures == []
    switch = fresh.serials.index(new)
    assert switch > 0
    assert set(fresh.serials[:switch]) == {old}
    assert set(fresh.serials[switch:]) == {new}, "an old certificate after the switch"
    assert kept_alive.failures == []
    assert len(kept_alive.serials) > 5
    assert set(kept_alive.serials) == {old}, "the connection in flight kept its certificate"
    reloaded = wait_for_log(server_on_volume, "serving certificate reloaded")
    assert reloaded["not_after"] == second.certificate.not_valid_after_utc.isoformat()


def test_readyz_reports_the_expiry_of_the_certificate_served_now(
    server_on_volume: Server,
    volume: SecretVolume,
    ca: CertificateAuthority,
    second: IssuedCertificate,
) -> None:
    context = ssl.create_default_context(cadata=ca.cert_pem().decode())
    volume.update(pair(second))
    deadline = time.monotonic() + RELOAD_SECONDS
    while fetch_serial(server_on_volume.port, context) != second.certificate.serial_number:
        assert time.monotonic() < deadline
        time.sleep(0.2)

    connection = open_connection(server_on_volume.port, context)
    connection.request("GET", "/readyz")
    report = json.loads(connection.getresponse().read())
    connection.close()

    check = report["checks"]["certificate"]
    assert check["ok"] is True
    assert f"serial {second.certificate.serial_number:x}" in check["detail"]
    assert second.certificate.not_valid_after_utc.isoformat() in check["detail"]


def test_the_server_refuses_to_start_with_a_key_that_is_not_the_certificates(
    tmp_path: Path, first: IssuedCertificate, second: IssuedCertificate
) -> None:
    volume = SecretVolume(tmp_path / "tls", pair(first, key_of=second))

    tls = ["--tls-cert", str(volume.path("tls.crt")), "--tls-key", str(volume.path("tls.key"))]
    finished = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "serve", "--port", "0", *tls],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert finished.returncode == 2
    [entry] = [json.loads(line) for line in finished.stderr.splitlines() if '"error"' in line]
    assert entry["message"] == "refusing to serve: the certificate and key cannot be used"
    assert entry["reason"] == "the key does not belong to the certificate"
