"""The key pairs the TLS tests share: two unrelated CAs and a serving certificate."""

from __future__ import annotations

import pytest

from webhook.tls.pki import (
    CertificateAuthority,
    IssuedCertificate,
    create_ca,
    issue_serving_certificate,
    service_dns_names,
)

SERVICE_NAMES = service_dns_names("gpu-admission", "gpu-system")


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return create_ca("test CA")


@pytest.fixture(scope="module")
def other_ca() -> CertificateAuthority:
    return create_ca("unrelated CA")


@pytest.fixture(scope="module")
def serving(ca: CertificateAuthority) -> IssuedCertificate:
    return issue_serving_certificate(
        ca,
        "gpu-admission.gpu-system.svc",
        dns_names=[*SERVICE_NAMES, "localhost"],
        ip_addresses=["127.0.0.1", "::1"],
    )
