"""The throwaway certificates of `gpu-admission serve` (webhook/tls/dev.py)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import DNSName, IPAddress
from cryptography.x509.verification import PolicyBuilder, Store

from webhook.tls.dev import DevCertificatePaths, ensure_dev_serving_certificate
from webhook.tls.files import load_ca, not_after, write_key_pair
from webhook.tls.pki import IssuedCertificate, issue_serving_certificate


def test_dev_certificate_is_created_in_an_empty_directory(tmp_path: Path) -> None:
    directory = tmp_path / "dev"
    paths = ensure_dev_serving_certificate(directory)
    assert paths == DevCertificatePaths(
        ca_cert=directory / "ca.crt", cert=directory / "tls.crt", key=directory / "tls.key"
    )
    assert (directory / "ca.key").exists()
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600
    assert stat.S_IMODE((directory / "ca.key").stat().st_mode) == 0o600
    ca = load_ca(paths.ca_cert, directory / "ca.key")
    served = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    store = PolicyBuilder().store(Store([ca.certificate]))
    for subject in (
        DNSName("localhost"),
        IPAddress(ipaddress.ip_address("127.0.0.1")),
        IPAddress(ipaddress.ip_address("::1")),
    ):
        store.build_server_verifier(subject).verify(served, [])


def test_dev_certificate_is_reused_on_a_second_call(tmp_path: Path) -> None:
    first = ensure_dev_serving_certificate(tmp_path)
    contents = {p: p.read_bytes() for p in tmp_path.iterdir()}
    second = ensure_dev_serving_certificate(tmp_path)
    assert second == first
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == contents


def test_dev_certificate_is_regenerated_when_it_is_near_expiry(tmp_path: Path) -> None:
    paths = ensure_dev_serving_certificate(tmp_path)
    ca = load_ca(paths.ca_cert, tmp_path / "ca.key")
    expiring = issue_serving_certificate(
        ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1", "::1"], days=10
    )
    write_key_pair(tmp_path, "tls", expiring)
    assert not_after(paths.cert) < dt.datetime.now(dt.UTC) + dt.timedelta(days=30)

    ensure_dev_serving_certificate(tmp_path)

    assert not_after(paths.cert) > dt.datetime.now(dt.UTC) + dt.timedelta(days=300)
    assert paths.ca_cert.read_bytes() != ca.cert_pem()


def test_dev_certificate_is_regenerated_when_it_does_not_cover_localhost(tmp_path: Path) -> None:
    paths = ensure_dev_serving_certificate(tmp_path)
    ca = load_ca(paths.ca_cert, tmp_path / "ca.key")
    write_key_pair(tmp_path, "tls", issue_serving_certificate(ca, "x", dns_names=["x"]))

    ensure_dev_serving_certificate(tmp_path)

    served = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    san = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)


def test_dev_certificate_is_regenerated_when_a_file_is_corrupt(tmp_path: Path) -> None:
    paths = ensure_dev_serving_certificate(tmp_path)
    paths.key.write_text("garbage")

    ensure_dev_serving_certificate(tmp_path)

    IssuedCertificate(
        certificate=x509.load_pem_x509_certificate(paths.cert.read_bytes()),
        private_key=load_ec_key(paths.key),
    )


def load_ec_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key
