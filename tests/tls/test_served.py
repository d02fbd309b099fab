"""CertificateState: the expiry of the served certificate, for /readyz, logs and metrics."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from webhook.tls.pki import create_ca, issue_serving_certificate
from webhook.tls.served import CertificateState, ServedCertificate, warn_if_expiring

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def served(days_left: float, serial: int = 0xABC) -> ServedCertificate:
    return ServedCertificate(
        serial_number=serial,
        subject="CN=gpu-admission.gpu-admission.svc",
        issuer="CN=gpu-admission CA",
        not_before=NOW - dt.timedelta(days=300),
        not_after=NOW + dt.timedelta(days=days_left),
    )


def test_a_served_certificate_is_described_from_the_x509_certificate() -> None:
    ca = create_ca("state CA")
    leaf = issue_serving_certificate(ca, "hook", dns_names=["hook"]).certificate

    described = ServedCertificate.of(leaf)

    assert described.serial_number == leaf.serial_number
    assert described.subject == "CN=hook"
    assert described.issuer == "CN=state CA"
    assert described.not_after == leaf.not_valid_after_utc


def test_seconds_left_counts_down_to_not_after() -> None:
    state = CertificateState(served(days_left=2))

    assert state.not_after == NOW + dt.timedelta(days=2)
    assert state.seconds_left(NOW) == 2 * 86400
    assert state.seconds_left(NOW + dt.timedelta(days=3)) == -86400


def test_replace_makes_the_new_certificate_current() -> None:
    state = CertificateState(served(days_left=2, serial=1))

    state.replace(served(days_left=300, serial=2))

    assert state.current.serial_number == 2
    assert state.seconds_left(NOW) == 300 * 86400


def test_readiness_of_a_valid_certificate_names_its_serial_and_expiry() -> None:
    ok, detail = CertificateState(served(days_left=200)).readiness()

    assert ok is True
    assert detail.startswith(f"serial abc expires at {(NOW + dt.timedelta(days=200)).isoformat()}")
    assert detail.endswith("days left)")


def test_readiness_under_30_days_is_still_ready_but_asks_for_renewal() -> None:
    ok, detail = CertificateState(served(days_left=5)).readiness()

    assert ok is True
    assert detail.endswith("; renew it")


def test_readiness_of_an_expired_certificate_is_not_ready() -> None:
    ok, detail = CertificateState(served(days_left=-1)).readiness()

    assert ok is False
    assert detail == f"serial abc expired at {(NOW - dt.timedelta(days=1)).isoformat()}"


@pytest.mark.parametrize(("days_left", "warns"), [(29.9, True), (30.1, False), (-1, True)])
def test_a_warning_is_logged_only_under_30_days(
    days_left: float, warns: bool, caplog: pytest.LogCaptureFixture
) -> None:
    log = logging.getLogger("test.cert_state")

    with caplog.at_level(logging.WARNING, "test.cert_state"):
        warned = warn_if_expiring(log, CertificateState(served(days_left)))

    assert warned is warns
    assert len(caplog.records) == (1 if warns else 0)
