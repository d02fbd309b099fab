"""Key pairs on disk: written atomically and privately, read back with what went wrong.

``write_key_pair`` writes ``<name>.crt`` and ``<name>.key`` so that a reader (a
server reloading its certificate, another command) sees either the old pair's file or
the new one's, never half a file, and so that a private key is readable by its owner
only from the moment it exists. ``load_ca`` and ``load_issued`` read pairs back,
``existing_ca`` the CA of a directory that ``gpu-admission certs generate`` reuses, and
``not_after`` the expiry of a certificate file. What the pairs are is
``webhook.tls.pki``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
from pathlib import Path

from webhook.tls.pki import (
    CertificateAuthority,
    IssuedCertificate,
    ca_from_pem,
    certificates_from_pem,
    issued_from_pem,
)
from webhook.tls.secret_layout import CA_CERTIFICATE, CA_PRIVATE_KEY

__all__ = ["existing_ca", "load_ca", "load_issued", "not_after", "write_key_pair"]


def write_key_pair(
    directory: Path, name: str, pair: CertificateAuthority | IssuedCertificate
) -> tuple[Path, Path]:
    """Write ``<name>.crt`` and ``<name>.key`` into ``directory``; return both paths.

    A missing directory is created with mode 0700. The key file has mode 0600 from the
    moment it exists. Each file is replaced atomically; the key is written first.
    """
    _check_file_name(name)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    _write_atomically(key_path, pair.key_pem(), 0o600)
    _write_atomically(cert_path, pair.cert_pem(), 0o644)
    _fsync_directory(directory)
    return cert_path, key_path


def _check_file_name(name: str) -> None:
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise ValueError(f"invalid key pair name {name!r}: expected a plain file name")
    if os.altsep is not None and os.altsep in name:
        raise ValueError(f"invalid key pair name {name!r}: expected a plain file name")


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` so that readers see either the old or the new content.

    The temporary file is created with ``mode`` in the same ``os.open`` call, so a private
    key is never readable by others, not even for a moment.
    """
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    fd = os.open(temporary, flags, mode)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_ca(cert_path: Path, key_path: Path) -> CertificateAuthority:
    """Load a CA written by ``write_key_pair`` (or any PEM CA with an unencrypted EC key).

    Raises ValueError if the files cannot be parsed, the key does not belong to the
    certificate, or the certificate is not a CA.
    """
    return ca_from_pem(cert_path.read_bytes(), key_path.read_bytes(), key_source=str(key_path))


def load_issued(cert_path: Path, key_path: Path) -> IssuedCertificate:
    """Load a leaf written by ``write_key_pair``; ValueError as ``load_ca``."""
    return issued_from_pem(cert_path.read_bytes(), key_path.read_bytes(), key_source=str(key_path))


def existing_ca(directory: Path) -> CertificateAuthority | None:
    """The CA in ``directory`` (``ca.crt`` and ``ca.key``), or None if there is none.

    Reusing a CA keeps every ``caBundle`` that already trusts it valid, so a renewed
    leaf needs no configuration change. One file without the other is a ValueError
    rather than a reason to start over: replacing a CA silently would break every client
    that trusts the old one.
    """
    cert_path, key_path = directory / CA_CERTIFICATE, directory / CA_PRIVATE_KEY
    present = [path for path in (cert_path, key_path) if path.exists()]
    if len(present) == 2:
        try:
            return load_ca(cert_path, key_path)
        except ValueError as error:
            raise ValueError(f"the CA in {directory} cannot be used: {error}") from None
    if present:
        missing = key_path if present == [cert_path] else cert_path
        raise ValueError(
            f"{present[0]} exists but {missing} does not: restore it, or remove "
            f"{present[0]} to create a new CA"
        )
    return None


def not_after(cert_path: Path) -> dt.datetime:
    """When the first certificate in the PEM file ``cert_path`` expires (timezone-aware UTC)."""
    return certificates_from_pem(cert_path.read_bytes())[0].not_valid_after_utc
