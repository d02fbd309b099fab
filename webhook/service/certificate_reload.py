"""Serve a renewed certificate without a restart and without dropping a connection.

Kubernetes updates a Secret volume by writing a new directory and atomically swapping
the ``..data`` symlink to it; the files the server opened by name never see a write, so
inotify on them stays silent. The reloader therefore polls (``webhook.service.file_poll``):
every few seconds it reads the certificate and key and compares a hash of their
contents with the last one seen.

A changed pair is checked before it is used: both must parse and the key must belong
to the certificate. A half-written pair, or the new certificate next to the old key, is
refused with a warning and the old pair keeps serving; the next change is tried again.

The context speaks TLS 1.2 and 1.3 only, and TLS 1.2 only with AEAD suites behind an
ECDHE key exchange (AES-GCM, ChaCha20-Poly1305): OpenSSL's defaults still offer CBC
suites with HMAC-SHA1/SHA256 (``serving_context``). TLS 1.3 suites are all AEAD.

A good pair is loaded into the very ``ssl.SSLContext`` uvicorn listens with.
OpenSSL copies a context's certificate and key into each connection when the
connection is created, so only new handshakes see the new pair and connections in
flight keep theirs. The load happens on the event loop thread, so no handshake can
start between installing the certificate and installing its key; and it loads from
in-memory copies of the bytes just checked, so a swap in the middle of a load cannot
mix two pairs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.errors import GpuAdmissionError
from webhook.service.file_poll import DEFAULT_INTERVAL, FilePoller, content_digest
from webhook.tls.key_match import key_matches
from webhook.tls.pki import certificates_from_pem
from webhook.tls.served import CertificateState, ServedCertificate, warn_if_expiring

__all__ = [
    "DEFAULT_INTERVAL",
    "CertificateReloader",
    "InvalidKeyPair",
    "KeyPairFiles",
    "KeyPairSnapshot",
    "check_key_pair",
    "read_key_pair",
    "serving_context",
]

log = logging.getLogger("gpu_admission.tls")


TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""OpenSSL cipher string of the TLS 1.2 suites served: ECDHE with an AEAD cipher only."""


def serving_context() -> ssl.SSLContext:
    """A server context without a certificate yet: TLS 1.2 or later, AEAD suites only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    return context


class InvalidKeyPair(GpuAdmissionError, ValueError):
    """The certificate and key files cannot be served together."""


@dataclass(frozen=True)
class KeyPairFiles:
    cert: Path
    key: Path


@dataclass(frozen=True)
class KeyPairSnapshot:
    """The bytes of both files as read at one moment."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def digest(self) -> str:
        return content_digest(self.cert_pem, self.key_pem)


def read_key_pair(files: KeyPairFiles) -> KeyPairSnapshot:
    """Read both files (OSError if either is missing or unreadable)."""
    return KeyPairSnapshot(cert_pem=files.cert.read_bytes(), key_pem=files.key.read_bytes())


def check_key_pair(snapshot: KeyPairSnapshot) -> x509.Certificate:
    """The leaf certificate of a pair that can be served; InvalidKeyPair says why not.

    The first certificate in the file is the leaf (any others are intermediates); the
    key, of any type OpenSSL serves, must hold the leaf's public key.
    """
    try:
        certificates = certificates_from_pem(snapshot.cert_pem)
    except ValueError as error:
        raise InvalidKeyPair(
            f"the certificate file holds no readable certificate: {error}"
        ) from None
    try:
        key = serialization.load_pem_private_key(snapshot.key_pem, password=None)
    except (ValueError, TypeError) as error:
        raise InvalidKeyPair(f"the key file holds no readable unencrypted key: {error}") from None
    leaf = certificates[0]
    if not key_matches(leaf, key):
        raise InvalidKeyPair("the key does not belong to the certificate")
    return leaf


@contextlib.contextmanager
def _files_holding(*contents: bytes) -> Iterator[list[str]]:
    """Paths OpenSSL can open that hold exactly ``contents``, gone afterwards.

    On Linux these are anonymous in-memory files, so no key is written anywhere, even
    with a read-only root filesystem; elsewhere a private temporary directory.
    """
    if hasattr(os, "memfd_create") and Path("/proc/self/fd").is_dir():
        descriptors: list[int] = []
        try:
            for data in contents:
                descriptor = os.memfd_create("gpu-admission-tls", os.MFD_CLOEXEC)
                descriptors.append(descriptor)
                with open(descriptor, "wb", closefd=False) as file:
                    file.write(data)
            yield [f"/proc/self/fd/{descriptor}" for descriptor in descriptors]
        finally:
            for descriptor in descriptors:
                os.close(descriptor)
        return
    with tempfile.TemporaryDirectory(prefix="gpu-admission-tls-") as directory:
        paths = []
        for index, data in enumerate(contents):
            path = Path(directory) / f"{index}.pem"
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(descriptor, "wb") as file:
                file.write(data)
            paths.append(str(path))
        yield paths


def _load_into(context: ssl.SSLContext, snapshot: KeyPairSnapshot) -> None:
    with _files_holding(snapshot.cert_pem, snapshot.key_pem) as (cert, key):
        context.load_cert_chain(cert, key)


class CertificateReloader:
    """Owns the server's TLS context and keeps it serving the pair in ``files``.

    The constructor loads the current pair and raises InvalidKeyPair (or OSError) if it
    cannot be served: better not to start than to start without a certificate.
    ``poll`` looks once; ``watch`` polls every ``interval`` seconds on the running
    event loop until cancelled.
    """

    def __init__(self, files: KeyPairFiles, *, interval: float = DEFAULT_INTERVAL) -> None:
        self.files = files
        self._poller = FilePoller(
            (files.cert, files.key), interval=interval, on_unreadable=self._unreadable
        )
        self.interval = interval
        snapshot = read_key_pair(files)
        leaf = check_key_pair(snapshot)
        self.context = serving_context()
        _load_into(self.context, snapshot)
        self.state = CertificateState(ServedCertificate.of(leaf))
        self._served = snapshot
        self._poller.seen((snapshot.cert_pem, snapshot.key_pem))
        self._warned_serial: int | None = None
        log.info("serving certificate loaded", extra=self._describe(self.state.current))
        self.check_expiry()

    def poll(self) -> bool:
        """Look at the files once; load them if they changed and can be served.

        Returns whether a new pair was loaded.
        """
        prepared = self._prepare()
        if prepared is None:
            self.check_expiry()
            return False
        return self._install(*prepared)

    async def watch(self) -> None:
        """Poll forever on the running loop; reading and checking run in a worker
        thread, the load itself on the loop (see the module docstring)."""
        await self._poller.run(
            self._prepare,
            lambda prepared: self._install(*prepared),
            idle=self.check_expiry,
            what="the serving certificate",
        )

    def check_expiry(self) -> None:
        """Warn once per certificate when it has under 30 days left."""
        serial = self.state.current.serial_number
        if self._warned_serial != serial and warn_if_expiring(log, self.state):
            self._warned_serial = serial

    def _prepare(self) -> tuple[KeyPairSnapshot, x509.Certificate] | None:
        contents = self._poller.look()
        if contents is None:
            return None
        cert_pem, key_pem = contents
        snapshot = KeyPairSnapshot(cert_pem=cert_pem, key_pem=key_pem)
        try:
            leaf = check_key_pair(snapshot)
        except InvalidKeyPair as error:
            self._refuse(str(error))
            return None
        return snapshot, leaf

    def _install(self, snapshot: KeyPairSnapshot, leaf: x509.Certificate) -> bool:
        try:
            _load_into(self.context, snapshot)
        except (ssl.SSLError, OSError) as error:
            # OpenSSL refused what the check accepted (a key too weak for its security
            # level, say). It may have installed the certificate before refusing the
            # key, so put the served pair back, and try the files again next time.
            _load_into(self.context, self._served)
            self._poller.forget()
            self._refuse(f"OpenSSL refused the pair: {error}")
            return False
        self._served = snapshot
        self.state.replace(ServedCertificate.of(leaf))
        self._warned_serial = None
        log.info("serving certificate reloaded", extra=self._describe(self.state.current))
        self.check_expiry()
        return True

    def _unreadable(self, error: OSError) -> None:
        self._refuse(f"unreadable: {error.strerror or error}")

    def _refuse(self, reason: str) -> None:
        log.warning(
            "not reloading the serving certificate: still serving the previous one",
            extra={
                "reason": reason,
                "cert_file": str(self.files.cert),
                "key_file": str(self.files.key),
                "serial": f"{self.state.current.serial_number:x}",
            },
        )

    def _describe(self, served: ServedCertificate) -> dict[str, str]:
        return {
            "cert_file": str(self.files.cert),
            "serial": f"{served.serial_number:x}",
            "subject": served.subject,
            "issuer": served.issuer,
            "not_after": served.not_after.isoformat(),
        }
