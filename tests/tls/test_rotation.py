"""Rotation logic against an in-memory cluster: what is renewed, when, and in which order.

The order matters more than anything else here: a caBundle must trust a CA before any
replica can serve a leaf from it, and must keep the old CA until no replica serves an
old leaf. The end-to-end test (tests/e2e/test_cert_rotation.py) runs the same code
through a real kube-apiserver.
"""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.x509 import DNSName, IPAddress
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from tests.tls.memory_store import MUTATING, NAMESPACE, VALIDATING, MemoryStore
from webhook.tls.pki import (
    CertificateAuthority,
    IssuedCertificate,
    ca_bundle,
    certificates_from_pem,
    create_ca,
    is_issued_by,
    issue_service_certificate,
    issue_serving_certificate,
    subject_alt_names,
)
from webhook.tls.rotation import RotationError, RotationRequest, rotate
from webhook.tls.secret_layout import CA_SECRET_TYPE, TLS_SECRET_TYPE


@pytest.fixture
def ca() -> CertificateAuthority:
    return create_ca("gpu-admission CA one")


@pytest.fixture
def serving(ca: CertificateAuthority) -> IssuedCertificate:
    return issue_service_certificate(ca, "gpu-admission", NAMESPACE, ip_addresses=["10.0.0.9"])


@pytest.fixture
def store(ca: CertificateAuthority, serving: IssuedCertificate) -> MemoryStore:
    """A cluster as `certs generate` plus two `kubectl create secret` leave it."""
    memory = MemoryStore()
    memory.secrets["tls"] = (
        {"tls.crt": serving.cert_pem(), "tls.key": serving.key_pem(), "ca.crt": ca.cert_pem()},
        TLS_SECRET_TYPE,
    )
    memory.secrets["tls-ca"] = ({"ca.crt": ca.cert_pem(), "ca.key": ca.key_pem()}, CA_SECRET_TYPE)
    memory.bundles = {MUTATING: ca_bundle(ca.certificate), VALIDATING: ca_bundle(ca.certificate)}
    return memory


def request(**changes: object) -> RotationRequest:
    fields: dict[str, object] = {
        "namespace": NAMESPACE,
        "secret": "tls",
        "ca_secret": "tls-ca",
        "propagation_delay": 5.0,
    }
    fields.update(changes)
    return RotationRequest(**fields)  # type: ignore[arg-type]


def at_fraction(certificate: x509.Certificate, elapsed: float) -> dt.datetime:
    """The moment when ``elapsed`` of the certificate's lifetime has gone by."""
    start, end = certificate.not_valid_before_utc, certificate.not_valid_after_utc
    return start + (end - start) * elapsed


def verifies(leaf: x509.Certificate, trusted: list[x509.Certificate], name: str) -> bool:
    subject = DNSName(name)
    verifier = PolicyBuilder().store(Store(trusted)).build_server_verifier(subject)
    try:
        verifier.verify(leaf, [])
    except VerificationError:
        return False
    return True


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# --- renewing the leaf ------------------------------------------------------------------------


def test_a_leaf_with_most_of_its_life_left_is_kept_and_nothing_is_written(
    store: MemoryStore, serving: IssuedCertificate
) -> None:
    now = at_fraction(serving.certificate, 0.5)

    report = rotate(store, request(), now=now)

    assert store.writes == []
    assert report.renewed is False
    assert report.lines[-1] == (
        f"leaf kept: serial {serving.certificate.serial_number:x}, 50% of its lifetime left "
        "(renewed under 33%)"
    )


def test_a_leaf_with_less_than_a_third_of_its_life_left_is_renewed_from_the_same_ca(
    store: MemoryStore, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    now = at_fraction(serving.certificate, 0.7)

    report = rotate(store, request(), now=now)

    assert report.renewed is True
    assert store.writes == ["secret tls"], "the caBundles already trust the CA"
    renewed = store.leaf()
    assert renewed.serial_number != serving.certificate.serial_number
    assert is_issued_by(renewed, ca.certificate)
    assert subject_alt_names(renewed) == subject_alt_names(serving.certificate)
    assert renewed.subject == serving.certificate.subject
    data, secret_type = store.secrets["tls"]
    assert secret_type == TLS_SECRET_TYPE
    assert data["ca.crt"] == ca.cert_pem()
    assert "renewing the leaf: 30% of its lifetime left, under 33%" in report.lines


def test_the_threshold_is_a_fraction_of_the_lifetime(
    store: MemoryStore, serving: IssuedCertificate
) -> None:
    now = at_fraction(serving.certificate, 0.3)

    assert rotate(store, request(threshold=0.8), now=now).renewed is True


def test_force_renews_a_fresh_leaf(store: MemoryStore) -> None:
    report = rotate(store, request(force=True))

    assert report.renewed is True
    assert "renewing the leaf: forced" in report.lines


def test_a_renewed_leaf_gains_the_names_of_the_service_it_is_told_about(
    store: MemoryStore,
) -> None:
    report = rotate(store, request(service="admission"))

    names, addresses = subject_alt_names(store.leaf())
    assert names[:4] == [
        "admission",
        "admission.gpu-admission",
        "admission.gpu-admission.svc",
        "admission.gpu-admission.svc.cluster.local",
    ]
    assert "gpu-admission.gpu-admission.svc" in names, "the names it had are kept"
    assert addresses == ["10.0.0.9"]
    assert any("it does not cover admission," in line for line in report.lines)


def test_other_keys_of_the_serving_secret_are_kept(store: MemoryStore) -> None:
    store.secrets["tls"][0]["note"] = b"kept"

    rotate(store, request(force=True))

    assert store.secrets["tls"][0]["note"] == b"kept"


def test_a_leaf_that_is_not_from_the_current_ca_is_renewed_and_the_bundle_gets_the_ca_first(
    store: MemoryStore, ca: CertificateAuthority
) -> None:
    replacement = create_ca("gpu-admission CA two")
    store.secrets["tls-ca"] = (
        {"ca.crt": replacement.cert_pem(), "ca.key": replacement.key_pem()},
        CA_SECRET_TYPE,
    )
    sleeps = Sleeps()

    report = rotate(store, request(), sleep=sleeps)

    assert store.writes == ["caBundles", "secret tls"]
    assert sleeps == [5.0]
    assert is_issued_by(store.leaf(), replacement.certificate)
    assert store.trusted() == [ca.certificate, replacement.certificate]
    assert "renewing the leaf: it was not issued by the current CA" in report.lines


def test_an_unreadable_leaf_is_renewed_for_the_service_it_is_told_about(
    store: MemoryStore,
) -> None:
    store.secrets["tls"][0]["tls.crt"] = b"garbage"

    rotate(store, request(service="gpu-admission"))

    assert "gpu-admission.gpu-admission.svc" in subject_alt_names(store.leaf())[0]


def test_an_unreadable_leaf_without_a_service_to_cover_is_an_error(store: MemoryStore) -> None:
    store.secrets["tls"][0]["tls.crt"] = b"garbage"

    with pytest.raises(RotationError, match="pass --service"):
        rotate(store, request())


# --- caBundles ------------------------------------------------------------------------------


def test_a_bundle_missing_the_current_ca_gets_it_and_keeps_other_valid_cas(
    store: MemoryStore, ca: CertificateAuthority
) -> None:
    other = create_ca("someone else's CA")
    store.bundles[VALIDATING] = ca_bundle(other.certificate)

    report = rotate(store, request())

    assert store.trusted(VALIDATING) == [other.certificate, ca.certificate]
    assert store.trusted(MUTATING) == [ca.certificate]
    assert report.changed_bundles == [VALIDATING]
    assert f"caBundle of {VALIDATING}: updated, 2 CA(s)" in report.lines
    assert f"caBundle of {MUTATING}: unchanged, 1 CA(s)" in report.lines


def test_expired_cas_are_dropped_from_a_bundle(
    store: MemoryStore, ca: CertificateAuthority
) -> None:
    short_lived = create_ca("expiring CA", days=1)
    store.bundles[MUTATING] = ca_bundle(short_lived.certificate, ca.certificate)

    rotate(store, request(), now=dt.datetime.now(dt.UTC) + dt.timedelta(days=2))

    assert store.trusted(MUTATING) == [ca.certificate]


def test_without_webhook_configurations_the_leaf_is_still_renewed(store: MemoryStore) -> None:
    store.bundles = {}

    report = rotate(store, request(force=True))

    assert report.renewed is True
    assert "no webhook configuration found: no caBundle to update" in report.lines


# --- rotating the CA --------------------------------------------------------------------------


def test_a_ca_rotation_trusts_both_cas_before_writing_a_leaf_from_the_new_one(
    store: MemoryStore, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    sleeps = Sleeps()

    report = rotate(store, request(rotate_ca=True), sleep=sleeps)

    assert store.writes == ["secret tls-ca", "caBundles", "secret tls"]
    assert sleeps == [5.0], "kube-apiserver gets time to see the new caBundle"
    new_ca = store.ca()
    assert new_ca != ca.certificate
    assert new_ca.subject != ca.certificate.subject, "each CA has a name of its own"
    for key in (MUTATING, VALIDATING):
        assert store.trusted(key) == [ca.certificate, new_ca]
    assert is_issued_by(store.leaf(), new_ca)
    assert store.secrets["tls"][0]["ca.crt"] == store.secrets["tls-ca"][0]["ca.crt"]
    assert report.ca_rotated and report.renewed
    name = "gpu-admission.gpu-admission.svc"
    assert verifies(serving.certificate, store.trusted(), name), "old replicas stay trusted"
    assert verifies(store.leaf(), store.trusted(), name), "new replicas are trusted"


def test_a_new_ca_lives_for_ca_days(store: MemoryStore) -> None:
    rotate(store, request(rotate_ca=True, ca_days=800, days=100), sleep=Sleeps())

    lifetime = store.ca().not_valid_after_utc - store.ca().not_valid_before_utc
    assert dt.timedelta(days=800) <= lifetime <= dt.timedelta(days=800, minutes=5)


def test_dropping_the_old_ca_leaves_only_the_new_one_in_every_bundle(
    store: MemoryStore, serving: IssuedCertificate
) -> None:
    rotate(store, request(rotate_ca=True), sleep=Sleeps())
    new_ca = store.ca()
    new_leaf = store.leaf()
    store.writes.clear()

    report = rotate(store, request(drop_old_ca=True))

    assert store.writes == ["caBundles"]
    assert store.trusted(MUTATING) == store.trusted(VALIDATING) == [new_ca]
    assert store.leaf() == new_leaf
    assert report.changed_bundles == [MUTATING, VALIDATING]
    assert not verifies(serving.certificate, store.trusted(), "gpu-admission.gpu-admission.svc")


def test_dropping_the_old_ca_is_refused_while_the_leaf_is_from_the_old_one(
    store: MemoryStore,
) -> None:
    replacement = create_ca("gpu-admission CA two")
    store.secrets["tls-ca"] = (
        {"ca.crt": replacement.cert_pem(), "ca.key": replacement.key_pem()},
        CA_SECRET_TYPE,
    )

    with pytest.raises(RotationError, match="not issued by the current CA yet"):
        rotate(store, request(drop_old_ca=True))
    assert store.writes == []


def test_a_ca_rotation_interrupted_before_the_bundles_is_finished_by_the_next_run(
    store: MemoryStore, ca: CertificateAuthority
) -> None:
    store.fail_bundle_writes = True
    with pytest.raises(RuntimeError):
        rotate(store, request(rotate_ca=True), sleep=Sleeps())
    assert store.writes == ["secret tls-ca"]
    store.fail_bundle_writes = False

    rotate(store, request(), sleep=Sleeps())

    new_ca = store.ca()
    assert store.writes[1:] == ["caBundles", "secret tls"]
    assert store.trusted() == [ca.certificate, new_ca]
    assert is_issued_by(store.leaf(), new_ca)


def test_a_ca_in_the_last_third_of_its_life_is_reported(store: MemoryStore) -> None:
    ca_certificate = certificates_from_pem(store.secrets["tls-ca"][0]["ca.crt"])[0]

    report = rotate(store, request(), now=at_fraction(ca_certificate, 0.9))

    assert report.lines[-1].startswith("warning: the CA expires on")
    assert "--rotate-ca" in report.lines[-1]


# --- what cannot be rotated ---------------------------------------------------------------------


def test_a_missing_serving_secret_is_an_error_naming_it(store: MemoryStore) -> None:
    del store.secrets["tls"]

    with pytest.raises(RotationError, match="the serving Secret gpu-admission/tls does not exist"):
        rotate(store, request())


def test_a_ca_secret_without_its_key_is_an_error_naming_it(store: MemoryStore) -> None:
    del store.secrets["tls-ca"][0]["ca.key"]

    with pytest.raises(RotationError, match=r"the CA Secret gpu-admission/tls-ca has no ca\.key"):
        rotate(store, request())


def test_a_ca_secret_holding_a_leaf_is_an_error(
    store: MemoryStore, serving: IssuedCertificate
) -> None:
    store.secrets["tls-ca"] = (
        {"ca.crt": serving.cert_pem(), "ca.key": serving.key_pem()},
        CA_SECRET_TYPE,
    )

    with pytest.raises(RotationError, match=r"cannot be used: .*not a CA"):
        rotate(store, request())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"threshold": 0}, "threshold must be between 0 and 1"),
        ({"threshold": 1.5}, "threshold must be between 0 and 1"),
        ({"rotate_ca": True, "drop_old_ca": True}, "in two runs"),
        ({"days": 400, "ca_days": 365}, "a CA outlives its leaves"),
        ({"days": 0}, "need 1 <= days"),
        ({"propagation_delay": -1}, "must not be negative"),
        ({"service": "Web_Hook"}, "invalid service name 'Web_Hook'"),
    ],
)
def test_a_request_that_makes_no_sense_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        request(**changes)


def test_a_leaf_for_an_ip_address_only_keeps_it(ca: CertificateAuthority) -> None:
    memory = MemoryStore()
    only_ip = issue_serving_certificate(ca, "127.0.0.1", dns_names=[], ip_addresses=["127.0.0.1"])
    memory.secrets["tls"] = (
        {"tls.crt": only_ip.cert_pem(), "tls.key": only_ip.key_pem()},
        TLS_SECRET_TYPE,
    )
    memory.secrets["tls-ca"] = ({"ca.crt": ca.cert_pem(), "ca.key": ca.key_pem()}, CA_SECRET_TYPE)

    rotate(memory, request(force=True))

    assert subject_alt_names(memory.leaf()) == ([], ["127.0.0.1"])
    verifier = PolicyBuilder().store(Store([ca.certificate]))
    address = IPAddress(ipaddress.ip_address("127.0.0.1"))
    verifier.build_server_verifier(address).verify(memory.leaf(), [])
