"""Issuing certificates and reading them back (webhook/tls/pki.py), down to real handshakes."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509 import DNSName, IPAddress
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from tests.tls.conftest import SERVICE_NAMES
from webhook.tls import pki as certs
from webhook.tls.files import write_key_pair
from webhook.tls.pki import (
    CertificateAuthority,
    IssuedCertificate,
    ca_bundle,
    create_ca,
    issue_client_certificate,
    issue_serving_certificate,
    service_dns_names,
)

T = TypeVar("T", bound=x509.ExtensionType)


def extension(certificate: x509.Certificate, kind: type[T]) -> x509.Extension[T]:
    return certificate.extensions.get_extension_for_class(kind)


# --- CertificateAuthority / create_ca -------------------------------------------------------


def test_ca_is_self_signed_and_may_sign_only_leaves(ca: CertificateAuthority) -> None:
    certificate = ca.certificate
    assert certificate.issuer == certificate.subject
    certificate.verify_directly_issued_by(certificate)
    constraints = extension(certificate, x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value.ca
    assert constraints.value.path_length == 0


def test_ca_key_usage_is_certificate_and_crl_signing_and_critical(
    ca: CertificateAuthority,
) -> None:
    usage = extension(ca.certificate, x509.KeyUsage)
    assert usage.critical
    assert usage.value.key_cert_sign
    assert usage.value.crl_sign
    assert not usage.value.digital_signature


def test_ca_has_a_subject_key_identifier_of_its_key(ca: CertificateAuthority) -> None:
    ski = extension(ca.certificate, x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(ca.private_key.public_key())


def test_ca_key_is_ecdsa_p256(ca: CertificateAuthority) -> None:
    assert isinstance(ca.private_key.curve, ec.SECP256R1)


def test_ca_pem_methods_round_trip(ca: CertificateAuthority) -> None:
    assert x509.load_pem_x509_certificate(ca.cert_pem()) == ca.certificate
    # PKCS#8, unencrypted (the marker is split so no tracked file looks like a key)
    assert ca.key_pem().startswith(b"-----BEGIN " + b"PRIVATE KEY-----")


def test_ca_lives_for_the_requested_number_of_days() -> None:
    short = create_ca("short", days=2)
    lifetime = short.certificate.not_valid_after_utc - short.certificate.not_valid_before_utc
    assert lifetime == dt.timedelta(days=2) + certs.CLOCK_SKEW


def test_ca_with_less_than_one_day_is_rejected() -> None:
    with pytest.raises(ValueError, match="days must be at least 1"):
        create_ca("bad", days=0)


def test_ca_with_empty_common_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="common_name"):
        create_ca("")


def test_certificate_authority_rejects_a_key_that_does_not_match(
    ca: CertificateAuthority, other_ca: CertificateAuthority
) -> None:
    with pytest.raises(ValueError, match="does not match"):
        CertificateAuthority(certificate=ca.certificate, private_key=other_ca.private_key)


def test_certificate_authority_rejects_a_leaf_certificate(serving: IssuedCertificate) -> None:
    with pytest.raises(ValueError, match="not a CA"):
        CertificateAuthority(certificate=serving.certificate, private_key=serving.private_key)


# --- issue_serving_certificate --------------------------------------------------------------


@pytest.mark.parametrize("name", [*SERVICE_NAMES, "localhost"])
def test_serving_certificate_verifies_against_the_ca_for_each_service_name(
    ca: CertificateAuthority, serving: IssuedCertificate, name: str
) -> None:
    verifier = PolicyBuilder().store(Store([ca.certificate])).build_server_verifier(DNSName(name))
    chain = verifier.verify(serving.certificate, [])
    assert chain[-1] == ca.certificate


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_serving_certificate_verifies_against_the_ca_for_each_ip_address(
    ca: CertificateAuthority, serving: IssuedCertificate, address: str
) -> None:
    subject = IPAddress(ipaddress.ip_address(address))
    verifier = PolicyBuilder().store(Store([ca.certificate])).build_server_verifier(subject)
    verifier.verify(serving.certificate, [])


def test_serving_certificate_does_not_verify_for_a_name_it_does_not_cover(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    verifier = (
        PolicyBuilder().store(Store([ca.certificate])).build_server_verifier(DNSName("example.com"))
    )
    with pytest.raises(VerificationError):
        verifier.verify(serving.certificate, [])


def test_serving_certificate_does_not_verify_against_another_ca(
    other_ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    verifier = (
        PolicyBuilder()
        .store(Store([other_ca.certificate]))
        .build_server_verifier(DNSName(SERVICE_NAMES[0]))
    )
    with pytest.raises(VerificationError):
        verifier.verify(serving.certificate, [])


def test_serving_certificate_lists_all_dns_names_and_ip_addresses_as_sans(
    serving: IssuedCertificate,
) -> None:
    san = extension(serving.certificate, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [*SERVICE_NAMES, "localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]


def test_serving_certificate_is_a_critical_non_ca_for_digital_signature_and_server_auth(
    serving: IssuedCertificate,
) -> None:
    constraints = extension(serving.certificate, x509.BasicConstraints)
    assert constraints.critical
    assert not constraints.value.ca
    usage = extension(serving.certificate, x509.KeyUsage)
    assert usage.critical
    assert usage.value.digital_signature
    assert not usage.value.key_cert_sign
    assert list(extension(serving.certificate, x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]


def test_serving_certificate_names_its_issuer_by_the_ca_key_identifier(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    aki = extension(serving.certificate, x509.AuthorityKeyIdentifier).value
    ski = extension(ca.certificate, x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ski.digest
    assert serving.certificate.issuer == ca.certificate.subject


def test_serving_certificate_has_its_own_p256_key(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    assert isinstance(serving.private_key.curve, ec.SECP256R1)
    assert serving.key_pem() != ca.key_pem()


def test_serial_numbers_are_random(ca: CertificateAuthority) -> None:
    serials = {
        issue_serving_certificate(ca, "x", dns_names=["x"]).certificate.serial_number
        for _ in range(5)
    }
    assert len(serials) == 5
    assert all(serial.bit_length() > 64 for serial in serials)


def test_leaf_validity_starts_five_minutes_in_the_past(ca: CertificateAuthority) -> None:
    before = dt.datetime.now(dt.UTC)
    issued = issue_serving_certificate(ca, "x", dns_names=["x"], days=10)
    after = dt.datetime.now(dt.UTC)
    not_before = issued.certificate.not_valid_before_utc
    assert before - certs.CLOCK_SKEW - dt.timedelta(seconds=1) <= not_before
    assert not_before <= after - certs.CLOCK_SKEW
    assert issued.certificate.not_valid_after_utc - not_before == (
        dt.timedelta(days=10) + certs.CLOCK_SKEW
    )


def test_ca_lifetime_is_longer_than_the_default_leaf_lifetime(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    assert ca.certificate.not_valid_after_utc > serving.certificate.not_valid_after_utc
    assert ca.certificate.not_valid_before_utc <= serving.certificate.not_valid_before_utc


def test_leaf_lifetime_is_clamped_to_the_ca_expiry() -> None:
    short_ca = create_ca("short-lived CA", days=30)
    issued = issue_serving_certificate(short_ca, "x", dns_names=["x"], days=365)
    assert issued.certificate.not_valid_after_utc == short_ca.certificate.not_valid_after_utc


def test_serving_certificate_without_any_san_is_rejected(ca: CertificateAuthority) -> None:
    with pytest.raises(ValueError, match="at least one DNS name or IP address"):
        issue_serving_certificate(ca, "x", dns_names=[])


def test_serving_certificate_with_only_an_ip_address_is_accepted(
    ca: CertificateAuthority,
) -> None:
    issued = issue_serving_certificate(ca, "x", dns_names=[], ip_addresses=["10.0.0.1"])
    san = extension(issued.certificate, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.1")]


@pytest.mark.parametrize("bad", ["not-an-ip", "300.1.1.1", "10.0.0.1/24", "", "fe80::1%eth0"])
def test_bad_ip_address_raises_value_error_naming_it(ca: CertificateAuthority, bad: str) -> None:
    with pytest.raises(ValueError, match="invalid IP address"):
        issue_serving_certificate(ca, "x", dns_names=["x"], ip_addresses=[bad])


def test_ip_address_given_as_dns_name_is_rejected(ca: CertificateAuthority) -> None:
    with pytest.raises(ValueError, match="pass it in ip_addresses"):
        issue_serving_certificate(ca, "x", dns_names=["10.0.0.1"])


def test_a_bare_string_for_dns_names_is_rejected(ca: CertificateAuthority) -> None:
    with pytest.raises(TypeError, match="not a string"):
        issue_serving_certificate(ca, "x", dns_names="localhost")


def test_serving_certificate_with_less_than_one_day_is_rejected(
    ca: CertificateAuthority,
) -> None:
    with pytest.raises(ValueError, match="days must be at least 1"):
        issue_serving_certificate(ca, "x", dns_names=["x"], days=0)


def test_issued_certificate_rejects_a_key_that_does_not_match(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    with pytest.raises(ValueError, match="does not match"):
        IssuedCertificate(certificate=serving.certificate, private_key=ca.private_key)


# --- issue_client_certificate ---------------------------------------------------------------


def test_client_certificate_carries_user_and_groups_and_client_auth(
    ca: CertificateAuthority,
) -> None:
    client = issue_client_certificate(ca, "admission-tester", organizations=["a", "b"])
    subject = client.certificate.subject
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        "admission-tester"
    ]
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "a",
        "b",
    ]
    assert list(extension(client.certificate, x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert not extension(client.certificate, x509.BasicConstraints).value.ca
    client.certificate.verify_directly_issued_by(ca.certificate)


# --- ca_bundle / service_dns_names ----------------------------------------------------------


def test_ca_bundle_decodes_to_the_pems_of_both_cas(
    ca: CertificateAuthority, other_ca: CertificateAuthority
) -> None:
    bundle = ca_bundle(ca.certificate, other_ca.certificate)
    decoded = base64.b64decode(bundle, validate=True)
    assert decoded == ca.cert_pem() + other_ca.cert_pem()
    assert x509.load_pem_x509_certificates(decoded) == [ca.certificate, other_ca.certificate]


def test_ca_bundle_needs_at_least_one_ca() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ca_bundle()


def test_service_dns_names_go_from_short_to_fully_qualified() -> None:
    assert service_dns_names("hook", "ns") == [
        "hook",
        "hook.ns",
        "hook.ns.svc",
        "hook.ns.svc.cluster.local",
    ]


@pytest.mark.parametrize(("service", "namespace"), [("", "ns"), ("hook", "a.b"), ("Hook", "ns")])
def test_service_dns_names_rejects_names_that_are_not_dns_labels(
    service: str, namespace: str
) -> None:
    with pytest.raises(ValueError, match="DNS label"):
        service_dns_names(service, namespace)


# --- real TLS handshakes --------------------------------------------------------------------


@contextmanager
def tls_server(
    cert: Path, key: Path, *, client_ca: Path | None = None
) -> Iterator[tuple[int, list[BaseException | str]]]:
    """Serve one TLS connection on 127.0.0.1; yield the port and what the server saw."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    outcome: list[BaseException | str] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        port = listener.getsockname()[1]

        def serve() -> None:
            try:
                connection, _ = listener.accept()
                connection.settimeout(10)
                with context.wrap_socket(connection, server_side=True) as tls:
                    peer = tls.getpeercert()
                    tls.sendall(b"ok")
                    outcome.append(repr(peer) if peer else "handshake")
            except (OSError, ssl.SSLError) as error:
                outcome.append(error)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield port, outcome
        finally:
            thread.join(timeout=10)
    assert not thread.is_alive()


def client_context(ca_cert: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_cert)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    return context


def handshake(port: int, context: ssl.SSLContext, server_hostname: str = "localhost") -> bytes:
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=server_hostname) as tls,
    ):
        return tls.recv(2)


def test_tls_handshake_succeeds_for_a_client_that_trusts_only_the_ca(
    tmp_path: Path, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    ca_cert, _ = write_key_pair(tmp_path, "ca", ca)
    cert, key = write_key_pair(tmp_path, "tls", serving)
    with tls_server(cert, key) as (port, outcome):
        assert handshake(port, client_context(ca_cert)) == b"ok"
    assert outcome == ["handshake"]


def test_tls_handshake_succeeds_for_the_service_name_the_api_server_uses(
    tmp_path: Path, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    ca_cert, _ = write_key_pair(tmp_path, "ca", ca)
    cert, key = write_key_pair(tmp_path, "tls", serving)
    with tls_server(cert, key) as (port, _):
        assert handshake(port, client_context(ca_cert), "gpu-admission.gpu-system.svc") == b"ok"


def test_tls_handshake_fails_for_a_client_that_trusts_a_different_ca(
    tmp_path: Path, other_ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    other_cert, _ = write_key_pair(tmp_path, "other", other_ca)
    cert, key = write_key_pair(tmp_path, "tls", serving)
    with tls_server(cert, key) as (port, outcome), pytest.raises(ssl.SSLCertVerificationError):
        handshake(port, client_context(other_cert))
    assert len(outcome) == 1
    assert isinstance(outcome[0], ssl.SSLError | OSError)


def test_tls_handshake_fails_for_a_host_name_the_certificate_does_not_cover(
    tmp_path: Path, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    ca_cert, _ = write_key_pair(tmp_path, "ca", ca)
    cert, key = write_key_pair(tmp_path, "tls", serving)
    with tls_server(cert, key) as (port, _), pytest.raises(ssl.SSLCertVerificationError):
        handshake(port, client_context(ca_cert), "example.com")


def test_mutual_tls_handshake_accepts_a_client_certificate_from_the_ca(
    tmp_path: Path, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    ca_cert, _ = write_key_pair(tmp_path, "ca", ca)
    cert, key = write_key_pair(tmp_path, "tls", serving)
    client = issue_client_certificate(ca, "admission-tester", organizations=["testers"])
    client_cert, client_key = write_key_pair(tmp_path, "client", client)
    context = client_context(ca_cert)
    context.load_cert_chain(client_cert, client_key)
    with tls_server(cert, key, client_ca=ca_cert) as (port, outcome):
        assert handshake(port, context) == b"ok"
    assert len(outcome) == 1
    assert "admission-tester" in str(outcome[0])


# --- reading pairs back from PEM (Secrets) --------------------------------------------------


def test_certificates_from_pem_returns_every_certificate_in_order(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    chain = certs.certificates_from_pem(serving.cert_pem() + ca.cert_pem())
    assert chain == [serving.certificate, ca.certificate]


def test_certificates_from_pem_rejects_a_blob_without_a_certificate(
    serving: IssuedCertificate,
) -> None:
    with pytest.raises(ValueError):
        certs.certificates_from_pem(serving.key_pem())


def test_ca_from_pem_reads_back_a_ca_kept_in_a_secret(ca: CertificateAuthority) -> None:
    again = certs.ca_from_pem(ca.cert_pem(), ca.key_pem())
    assert again.certificate == ca.certificate
    assert again.key_pem() == ca.key_pem()


def test_ca_from_pem_rejects_the_key_of_another_ca(
    ca: CertificateAuthority, other_ca: CertificateAuthority
) -> None:
    with pytest.raises(ValueError, match="does not match"):
        certs.ca_from_pem(ca.cert_pem(), other_ca.key_pem())


def test_issued_from_pem_reads_back_a_serving_pair(serving: IssuedCertificate) -> None:
    again = certs.issued_from_pem(serving.cert_pem(), serving.key_pem())
    assert again.certificate == serving.certificate


# --- issue_service_certificate / subject_alt_names ------------------------------------------


def test_a_service_certificate_covers_the_four_service_names_then_the_extras(
    ca: CertificateAuthority,
) -> None:
    issued = certs.issue_service_certificate(
        ca, "hook", "gpu", dns_names=["hook.example.com"], ip_addresses=["10.0.0.7"]
    )
    names, addresses = certs.subject_alt_names(issued.certificate)
    assert names == [
        "hook",
        "hook.gpu",
        "hook.gpu.svc",
        "hook.gpu.svc.cluster.local",
        "hook.example.com",
    ]
    assert addresses == ["10.0.0.7"]
    assert issued.certificate.subject.rfc4514_string() == "CN=hook.gpu.svc"


def test_a_service_certificate_verifies_for_the_name_kube_apiserver_calls(
    ca: CertificateAuthority,
) -> None:
    issued = certs.issue_service_certificate(ca, "hook", "gpu")
    verifier = (
        PolicyBuilder()
        .store(Store([ca.certificate]))
        .build_server_verifier(DNSName("hook.gpu.svc"))
    )
    verifier.verify(issued.certificate, [])


def test_a_service_certificate_for_a_name_that_is_not_a_dns_label_is_refused(
    ca: CertificateAuthority,
) -> None:
    with pytest.raises(ValueError, match="invalid service name 'Hook'"):
        certs.issue_service_certificate(ca, "Hook", "gpu")


def test_subject_alt_names_of_a_ca_are_empty(ca: CertificateAuthority) -> None:
    assert certs.subject_alt_names(ca.certificate) == ([], [])


# --- is_issued_by / life_left / decode_ca_bundle --------------------------------------------


def test_is_issued_by_tells_the_issuing_ca_from_another(
    ca: CertificateAuthority, other_ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    assert certs.is_issued_by(serving.certificate, ca.certificate)
    assert not certs.is_issued_by(serving.certificate, other_ca.certificate)


def test_is_issued_by_is_false_for_a_ca_with_the_same_name_but_another_key(
    ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    twin = create_ca("test CA")  # same subject as `ca`, different key
    assert not certs.is_issued_by(serving.certificate, twin.certificate)


def test_life_left_goes_from_one_to_zero_over_the_validity_period(
    serving: IssuedCertificate,
) -> None:
    start = serving.certificate.not_valid_before_utc
    end = serving.certificate.not_valid_after_utc
    assert certs.life_left(serving.certificate, start) == 1.0
    assert certs.life_left(serving.certificate, start + (end - start) / 4) == pytest.approx(0.75)
    assert certs.life_left(serving.certificate, end) == 0.0
    assert certs.life_left(serving.certificate, end + dt.timedelta(days=1)) == 0.0


def test_decode_ca_bundle_is_the_inverse_of_ca_bundle(
    ca: CertificateAuthority, other_ca: CertificateAuthority
) -> None:
    bundle = ca_bundle(ca.certificate, other_ca.certificate)
    assert certs.decode_ca_bundle(bundle) == [ca.certificate, other_ca.certificate]


def test_decode_ca_bundle_of_an_empty_bundle_is_empty() -> None:
    assert certs.decode_ca_bundle("") == []


@pytest.mark.parametrize("bundle", ["not base64!", base64.b64encode(b"no PEM here").decode()])
def test_decode_ca_bundle_refuses_what_is_not_base64_of_certificates(bundle: str) -> None:
    with pytest.raises(ValueError):
        certs.decode_ca_bundle(bundle)
