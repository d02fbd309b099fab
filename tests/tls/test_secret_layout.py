"""What the certificate Secrets hold (webhook/tls/secret_layout.py)."""

from __future__ import annotations

import pytest

from webhook.tls.pki import CertificateAuthority, IssuedCertificate, certificates_from_pem
from webhook.tls.secret_layout import (
    CA_SECRET_TYPE,
    TLS_SECRET_TYPE,
    ca_from_secret,
    ca_secret_data,
    serving_secret_data,
)


def test_the_serving_secret_is_what_kubectl_create_secret_tls_makes_plus_the_ca(
    serving: IssuedCertificate, ca: CertificateAuthority
) -> None:
    assert TLS_SECRET_TYPE == "kubernetes.io/tls"
    assert serving_secret_data(serving, ca) == {
        "tls.crt": serving.cert_pem(),
        "tls.key": serving.key_pem(),
        "ca.crt": ca.cert_pem(),
    }


def test_the_ca_secret_holds_the_ca_and_its_key(ca: CertificateAuthority) -> None:
    assert CA_SECRET_TYPE == "Opaque"
    assert ca_secret_data(ca) == {"ca.crt": ca.cert_pem(), "ca.key": ca.key_pem()}


def test_the_ca_is_read_back_from_its_secret(ca: CertificateAuthority) -> None:
    again = ca_from_secret(ca_secret_data(ca))
    assert again.certificate == ca.certificate
    assert again.key_pem() == ca.key_pem()


def test_a_ca_secret_holding_a_leaf_is_refused(
    serving: IssuedCertificate, ca: CertificateAuthority
) -> None:
    data = {"ca.crt": serving.cert_pem(), "ca.key": serving.key_pem()}
    with pytest.raises(ValueError, match="not a CA"):
        ca_from_secret(data)


def test_the_serving_secret_carries_the_issuing_ca_for_clients_to_trust(
    serving: IssuedCertificate, ca: CertificateAuthority
) -> None:
    data = serving_secret_data(serving, ca)
    leaf = certificates_from_pem(data["tls.crt"])[0]
    leaf.verify_directly_issued_by(certificates_from_pem(data["ca.crt"])[0])
