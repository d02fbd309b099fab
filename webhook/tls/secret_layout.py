"""What the two certificate Secrets hold: their types, their keys, and the data of each.

The serving Secret is a ``kubernetes.io/tls`` Secret the pods mount: the leaf
(``tls.crt``), its key (``tls.key``) and the CA that issued it (``ca.crt``, which
cert-manager writes too). The CA Secret (``Opaque``: ``ca.crt``, ``ca.key``) is
mounted by nothing; rotation reads the CA from it to issue the next leaf. Everything
that reads or writes either Secret (rotation, ``gpu-admission install``) goes
through here. The keys are also the file names of a mounted Secret, so the
development directory `serve` makes and `certs generate --out` use them too.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.tls.pki import CertificateAuthority, IssuedCertificate, ca_from_pem

__all__ = [
    "CA_CERTIFICATE",
    "CA_KEYS",
    "CA_PRIVATE_KEY",
    "CA_SECRET_TYPE",
    "CERTIFICATE",
    "PRIVATE_KEY",
    "TLS_SECRET_TYPE",
    "ca_from_secret",
    "ca_secret_data",
    "serving_secret_data",
]

TLS_SECRET_TYPE = "kubernetes.io/tls"
CA_SECRET_TYPE = "Opaque"

CERTIFICATE = "tls.crt"
PRIVATE_KEY = "tls.key"
CA_CERTIFICATE = "ca.crt"
CA_PRIVATE_KEY = "ca.key"

CA_KEYS = (CA_CERTIFICATE, CA_PRIVATE_KEY)
"""What the CA Secret must hold."""


def serving_secret_data(leaf: IssuedCertificate, ca: CertificateAuthority) -> dict[str, bytes]:
    """The data of the serving Secret for ``leaf``, issued by ``ca``."""
    return {
        CERTIFICATE: leaf.cert_pem(),
        PRIVATE_KEY: leaf.key_pem(),
        CA_CERTIFICATE: ca.cert_pem(),
    }


def ca_secret_data(ca: CertificateAuthority) -> dict[str, bytes]:
    """The data of the CA Secret for ``ca``."""
    return {CA_CERTIFICATE: ca.cert_pem(), CA_PRIVATE_KEY: ca.key_pem()}


def ca_from_secret(data: Mapping[str, bytes]) -> CertificateAuthority:
    """The CA the data of a CA Secret holds; KeyError if a key is missing, ValueError
    if the pair cannot be used (as ``webhook.tls.pki.ca_from_pem``)."""
    return ca_from_pem(data[CA_CERTIFICATE], data[CA_PRIVATE_KEY])
