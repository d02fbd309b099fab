"""Issuing and reading the certificates that serve the admission webhook over TLS.

The Kubernetes API server only calls admission webhooks over HTTPS, and it checks the
webhook's serving certificate against the ``caBundle`` in the webhook configuration.
This module creates the small private PKI that needs: a certificate authority, serving
certificates whose subjectAltNames match the webhook Service's DNS names (the API server
ignores the common name), and client certificates for mutual TLS. It reads them back
from PEM, produces and decodes the base64 ``caBundle`` value, and answers what a
renewal asks of a certificate (its names, its issuer, its life left). Everything here
works in memory: files are ``webhook.tls.files``, the throwaway certificates of
``gpu-admission serve`` ``webhook.tls.dev``.

All keys are ECDSA P-256 and all signatures use SHA-256.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.tls.key_match import key_matches

__all__ = [
    "CLOCK_SKEW",
    "CertificateAuthority",
    "IssuedCertificate",
    "ca_bundle",
    "ca_from_pem",
    "certificates_from_pem",
    "create_ca",
    "decode_ca_bundle",
    "is_issued_by",
    "issue_client_certificate",
    "issue_service_certificate",
    "issue_serving_certificate",
    "issued_from_pem",
    "life_left",
    "service_dns_names",
    "subject_alt_names",
]

#: How far ``not_valid_before`` is moved into the past, so that peers whose clocks run a
#: little behind ours accept a certificate issued just now.
CLOCK_SKEW = dt.timedelta(minutes=5)

_MAX_COMMON_NAME = 64  # ub-common-name in RFC 5280
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _cert_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key_pem(private_key: ec.EllipticCurvePrivateKey) -> bytes:
    return private_key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )


def _check_key_matches(certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"private key must be an EllipticCurvePrivateKey, not {type(key)!r}")
    if not isinstance(certificate.public_key(), ec.EllipticCurvePublicKey):
        raise ValueError("certificate does not hold an elliptic-curve public key")
    if not key_matches(certificate, key):
        raise ValueError("private key does not match the certificate's public key")


def _is_ca(certificate: x509.Certificate) -> bool:
    try:
        constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    except x509.ExtensionNotFound:
        return False
    return constraints.value.ca


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA certificate together with the private key that signs leaf certificates."""

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey

    def __post_init__(self) -> None:
        _check_key_matches(self.certificate, self.private_key)
        if not _is_ca(self.certificate):
            raise ValueError("certificate is not a CA certificate (basicConstraints ca=False)")

    def cert_pem(self) -> bytes:
        """The certificate, PEM-encoded."""
        return _cert_pem(self.certificate)

    def key_pem(self) -> bytes:
        """The private key, PEM-encoded PKCS#8, unencrypted."""
        return _key_pem(self.private_key)


@dataclass(frozen=True)
class IssuedCertificate:
    """A leaf (serving or client) certificate together with its private key."""

    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey

    def __post_init__(self) -> None:
        _check_key_matches(self.certificate, self.private_key)

    def cert_pem(self) -> bytes:
        """The certificate, PEM-encoded (the leaf only, without the CA)."""
        return _cert_pem(self.certificate)

    def key_pem(self) -> bytes:
        """The private key, PEM-encoded PKCS#8, unencrypted."""
        return _key_pem(self.private_key)


def _now() -> dt.datetime:
    # X.509 times have a resolution of one second; drop the rest so that what we put in
    # a certificate compares equal to what we read back.
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _check_days(days: int) -> None:
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")


def _check_common_name(common_name: str) -> None:
    if not common_name:
        raise ValueError("common_name must not be empty")
    if len(common_name) > _MAX_COMMON_NAME:
        raise ValueError(
            f"common_name must be at most {_MAX_COMMON_NAME} characters, "
            f"got {len(common_name)}: {common_name!r}"
        )


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def create_ca(common_name: str, *, days: int = 3650) -> CertificateAuthority:
    """Create a self-signed CA that can sign leaf certificates but no further CAs."""
    _check_common_name(common_name)
    _check_days(days)
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(certificate=certificate, private_key=key)


def _authority_key_identifier(ca: CertificateAuthority) -> x509.AuthorityKeyIdentifier:
    try:
        ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier)
    except x509.ExtensionNotFound:
        return x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key())
    return x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski.value)


def _issue(
    ca: CertificateAuthority,
    subject: x509.Name,
    *,
    usage: x509.ObjectIdentifier,
    san: Sequence[x509.GeneralName],
    days: int,
) -> IssuedCertificate:
    _check_days(days)
    now = _now()
    ca_not_before = ca.certificate.not_valid_before_utc
    ca_not_after = ca.certificate.not_valid_after_utc
    if ca_not_after <= now:
        raise ValueError(f"the CA expired at {ca_not_after.isoformat()}")
    # A leaf must not outlive the CA that vouches for it, nor start before it.
    not_before = max(now - CLOCK_SKEW, ca_not_before)
    not_after = min(now + dt.timedelta(days=days), ca_not_after)
    key = _new_key()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(_authority_key_identifier(ca), critical=False)
    )
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
    certificate = builder.sign(ca.private_key, hashes.SHA256())
    return IssuedCertificate(certificate=certificate, private_key=key)


def _parse_ip(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(
            f"invalid IP address {value!r} in ip_addresses: expected an IPv4 or IPv6 address "
            "such as '10.0.0.1' or '::1'"
        ) from None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        raise ValueError(
            f"invalid IP address {value!r} in ip_addresses: a certificate cannot carry an "
            "IPv6 scope (the part after '%')"
        )
    return address


def _check_dns_name(value: str) -> str:
    if not value or value != value.strip():
        raise ValueError(f"invalid DNS name {value!r} in dns_names")
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return value
    raise ValueError(f"{value!r} is an IP address: pass it in ip_addresses, not dns_names")


def issue_serving_certificate(
    ca: CertificateAuthority,
    common_name: str,
    *,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str] = (),
    days: int = 365,
) -> IssuedCertificate:
    """Issue a TLS server certificate for the given DNS names and IP addresses.

    Clients (the Kubernetes API server among them) match only the subjectAltNames, so at
    least one DNS name or IP address is required. The lifetime is cut short if the CA
    expires first.
    """
    if isinstance(dns_names, str) or isinstance(ip_addresses, str):
        raise TypeError("dns_names and ip_addresses must be sequences of strings, not a string")
    _check_common_name(common_name)
    _check_days(days)
    names = list(dict.fromkeys(_check_dns_name(name) for name in dns_names))
    addresses = list(dict.fromkeys(_parse_ip(address) for address in ip_addresses))
    if not names and not addresses:
        raise ValueError(
            "a serving certificate needs at least one DNS name or IP address: clients match "
            "the subjectAltName and ignore the common name"
        )
    san: list[x509.GeneralName] = [x509.DNSName(name) for name in names]
    san += [x509.IPAddress(address) for address in addresses]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    return _issue(ca, subject, usage=ExtendedKeyUsageOID.SERVER_AUTH, san=san, days=days)


def issue_client_certificate(
    ca: CertificateAuthority,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    days: int = 365,
) -> IssuedCertificate:
    """Issue a TLS client certificate.

    Kubernetes reads the common name as the user name and each organization as a group.
    """
    if isinstance(organizations, str):
        raise TypeError("organizations must be a sequence of strings, not a string")
    _check_common_name(common_name)
    _check_days(days)
    for organization in organizations:
        if not organization:
            raise ValueError("organizations must not contain an empty string")
    attributes = [
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)
        for organization in dict.fromkeys(organizations)
    ]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    subject = x509.Name(attributes)
    return _issue(ca, subject, usage=ExtendedKeyUsageOID.CLIENT_AUTH, san=(), days=days)


def certificates_from_pem(data: bytes) -> list[x509.Certificate]:
    """Every certificate in a PEM blob, in order; ValueError if there is none."""
    return x509.load_pem_x509_certificates(data)


def _ec_key_from_pem(data: bytes, source: str) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{source} does not hold an elliptic-curve private key")
    return key


def ca_from_pem(
    cert_pem: bytes, key_pem: bytes, *, key_source: str = "the CA key"
) -> CertificateAuthority:
    """A CA from its PEMs, e.g. the ``ca.crt``/``ca.key`` of a Secret or of a directory.

    Raises ValueError if they cannot be parsed, the key (named ``key_source`` in the
    message) does not belong to the certificate, or the certificate is not a CA.
    """
    certificate = certificates_from_pem(cert_pem)[0]
    return CertificateAuthority(certificate, _ec_key_from_pem(key_pem, key_source))


def issued_from_pem(
    cert_pem: bytes, key_pem: bytes, *, key_source: str = "the serving key"
) -> IssuedCertificate:
    """A leaf and its key, e.g. the ``tls.crt``/``tls.key`` of a Secret; ValueError if they
    cannot be parsed or do not belong together."""
    certificate = certificates_from_pem(cert_pem)[0]
    return IssuedCertificate(certificate, _ec_key_from_pem(key_pem, key_source))


def ca_bundle(*cas: x509.Certificate) -> str:
    """The ``caBundle`` value for a webhook configuration: base64 of the concatenated PEMs."""
    if not cas:
        raise ValueError("ca_bundle needs at least one CA certificate")
    return base64.b64encode(b"".join(_cert_pem(ca) for ca in cas)).decode("ascii")


def decode_ca_bundle(bundle: str) -> list[x509.Certificate]:
    """The certificates of a ``caBundle`` value (the inverse of ``ca_bundle``).

    An empty bundle holds no certificate; anything that is not base64 of PEM
    certificates is a ValueError.
    """
    if not bundle:
        return []
    try:
        pem = base64.b64decode(bundle, validate=True)
    except ValueError:
        raise ValueError("caBundle is not valid base64") from None
    return certificates_from_pem(pem)


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names under which a Service is reached from inside the cluster.

    These are the names the webhook's serving certificate must cover; the API server
    calls ``<service>.<namespace>.svc``.
    """
    for kind, value in (("service", service), ("namespace", namespace)):
        if not _DNS_LABEL.fullmatch(value):
            raise ValueError(
                f"invalid {kind} name {value!r}: expected a DNS label (lowercase letters, "
                "digits and '-', at most 63 characters)"
            )
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def issue_service_certificate(
    ca: CertificateAuthority,
    service: str,
    namespace: str,
    *,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    days: int = 365,
) -> IssuedCertificate:
    """A serving certificate for the Service ``service`` in ``namespace``.

    It covers every name of ``service_dns_names`` (kube-apiserver calls
    ``<service>.<namespace>.svc``) plus any extra names and addresses, e.g. for a
    webhook configuration that uses ``clientConfig.url``.
    """
    if isinstance(dns_names, str) or isinstance(ip_addresses, str):
        raise TypeError("dns_names and ip_addresses must be sequences of strings, not a string")
    names = [*service_dns_names(service, namespace), *dns_names]
    return issue_serving_certificate(
        ca,
        f"{service}.{namespace}.svc",
        dns_names=names,
        ip_addresses=ip_addresses,
        days=days,
    )


def subject_alt_names(certificate: x509.Certificate) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses (as text) a certificate covers, so a renewal can
    cover the same ones."""
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return [], []
    names = san.value.get_values_for_type(x509.DNSName)
    addresses = [str(address) for address in san.value.get_values_for_type(x509.IPAddress)]
    return names, addresses


def is_issued_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` signed ``certificate`` (its issuer name matches and the signature
    verifies); a renewal is due when the CA has been replaced."""
    try:
        certificate.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def life_left(certificate: x509.Certificate, now: dt.datetime | None = None) -> float:
    """The fraction of its validity period a certificate has still ahead of it.

    1.0 when it has just become valid, 0.0 once it has expired. Renewing at a fraction
    rather than a fixed number of days suits both short and long lifetimes.
    """
    moment = now or _now()
    start = certificate.not_valid_before_utc
    end = certificate.not_valid_after_utc
    total = (end - start).total_seconds()
    if total <= 0 or moment >= end:
        return 0.0
    return min(1.0, (end - moment).total_seconds() / total)
