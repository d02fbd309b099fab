"""Whether a private key belongs to a certificate: the one check behind every key pair.

Issuing refuses a CA or leaf whose key is not the certificate's, and the service
refuses to serve a renewed pair whose key is not the new certificate's (a Secret
volume caught between two versions, say). Both ask ``key_matches``.

The public keys are compared as SubjectPublicKeyInfo DER, which names the
algorithm and its parameters along with the key, so keys of any type OpenSSL serves
compare, and keys of different types never match.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes

__all__ = ["key_matches"]


def key_matches(certificate: x509.Certificate, private_key: PrivateKeyTypes) -> bool:
    """Whether ``private_key`` holds the public key ``certificate`` was issued for."""
    return _public_key_der(certificate.public_key()) == _public_key_der(private_key.public_key())


def _public_key_der(key: PublicKeyTypes) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
