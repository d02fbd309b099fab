"""Throwaway certificates for ``gpu-admission serve`` when it is given none.

A development run needs TLS like any other (kube-apiserver calls webhooks over HTTPS
only), but no one should have to make a CA for it. ``ensure_dev_serving_certificate``
keeps a CA and a localhost serving certificate in one directory, reuses them while
they chain together, cover localhost, 127.0.0.1 and ::1 and have more than 30 days
left, and replaces both otherwise. A lock on the directory keeps two servers started
at once from mixing their key pairs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import ipaddress
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, Subject, VerificationError

from webhook.tls.files import load_ca, load_issued, write_key_pair
from webhook.tls.pki import create_ca, issue_serving_certificate
from webhook.tls.secret_layout import CA_CERTIFICATE, CA_PRIVATE_KEY, CERTIFICATE, PRIVATE_KEY

__all__ = [
    "DEV_DNS_NAMES",
    "DEV_IP_ADDRESSES",
    "DEV_RENEW_BEFORE",
    "DevCertificatePaths",
    "ensure_dev_serving_certificate",
]

#: ``ensure_dev_serving_certificate`` replaces certificates that expire sooner than this.
DEV_RENEW_BEFORE = dt.timedelta(days=30)

DEV_DNS_NAMES = ("localhost",)
DEV_IP_ADDRESSES = ("127.0.0.1", "::1")


@dataclass(frozen=True)
class DevCertificatePaths:
    """Where ``ensure_dev_serving_certificate`` keeps the development certificates."""

    ca_cert: Path
    cert: Path
    key: Path


def ensure_dev_serving_certificate(directory: Path) -> DevCertificatePaths:
    """Provide a CA and a localhost serving certificate for ``gpu-admission serve``.

    Used when no certificate was configured. Files in ``directory`` (``ca.crt``,
    ``ca.key``, ``tls.crt``, ``tls.key``) are reused if they chain together, cover
    localhost, 127.0.0.1 and ::1, and stay valid for more than 30 more days; otherwise a new
    CA and serving certificate replace them. Point clients at ``ca_cert`` to trust it.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = DevCertificatePaths(
        ca_cert=directory / CA_CERTIFICATE,
        cert=directory / CERTIFICATE,
        key=directory / PRIVATE_KEY,
    )
    ca_key = directory / CA_PRIVATE_KEY
    with _locked(directory):
        if _dev_certificates_usable(paths, ca_key):
            return paths
        ca = create_ca("gpu-admission development CA")
        serving = issue_serving_certificate(
            ca, "localhost", dns_names=DEV_DNS_NAMES, ip_addresses=DEV_IP_ADDRESSES
        )
        write_key_pair(directory, "ca", ca)
        write_key_pair(directory, "tls", serving)
    return paths


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` so concurrent callers do not mix key pairs."""
    fd = os.open(directory / ".lock", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _dev_certificates_usable(paths: DevCertificatePaths, ca_key: Path) -> bool:
    try:
        ca = load_ca(paths.ca_cert, ca_key)
        issued = load_issued(paths.cert, paths.key)
    except (FileNotFoundError, ValueError, TypeError):
        return False
    now = dt.datetime.now(dt.UTC)
    if issued.certificate.not_valid_after_utc - now <= DEV_RENEW_BEFORE:
        return False
    if ca.certificate.not_valid_after_utc - now <= DEV_RENEW_BEFORE:
        return False
    policy = PolicyBuilder().store(Store([ca.certificate])).time(now)
    subjects: list[Subject] = [x509.DNSName(n) for n in DEV_DNS_NAMES]
    subjects += [x509.IPAddress(ipaddress.ip_address(a)) for a in DEV_IP_ADDRESSES]
    try:
        for subject in subjects:
            policy.build_server_verifier(subject).verify(issued.certificate, [])
    except VerificationError:
        return False
    return True
