"""Whether a private key belongs to a certificate (webhook/tls/key_match.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

from webhook.tls.key_match import key_matches
from webhook.tls.pki import CertificateAuthority, IssuedCertificate


def self_signed(key: CertificateIssuerPrivateKeyTypes) -> x509.Certificate:
    """A certificate for ``key``, of whatever type, the way another tool would make it."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "elsewhere")])
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_the_key_a_certificate_was_issued_for_matches_it(
    serving: IssuedCertificate, ca: CertificateAuthority
) -> None:
    assert key_matches(serving.certificate, serving.private_key)
    assert key_matches(ca.certificate, ca.private_key)


def test_the_key_of_another_pair_does_not_match(
    serving: IssuedCertificate, ca: CertificateAuthority
) -> None:
    assert not key_matches(serving.certificate, ca.private_key)


def test_an_rsa_pair_made_elsewhere_matches_too(rsa_key: rsa.RSAPrivateKey) -> None:
    assert key_matches(self_signed(rsa_key), rsa_key)


def test_a_key_of_another_type_never_matches(
    rsa_key: rsa.RSAPrivateKey, serving: IssuedCertificate
) -> None:
    assert not key_matches(self_signed(rsa_key), serving.private_key)
    assert not key_matches(serving.certificate, rsa_key)


def test_an_elliptic_curve_key_on_another_curve_does_not_match(
    serving: IssuedCertificate,
) -> None:
    other_curve = ec.generate_private_key(ec.SECP384R1())
    assert not key_matches(serving.certificate, other_curve)
