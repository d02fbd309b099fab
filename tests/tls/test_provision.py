"""The certificates of an install (webhook/tls/provision.py): created in an empty
cluster, left to rotation once they exist, and the caBundle install writes."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from cryptography.x509 import DNSName
from cryptography.x509.verification import PolicyBuilder, Store

from tests.tls.memory_store import MUTATING, NAMESPACE, VALIDATING, MemoryStore
from webhook.tls.pki import (
    CertificateAuthority,
    ca_bundle,
    create_ca,
    decode_ca_bundle,
    is_issued_by,
    issue_service_certificate,
)
from webhook.tls.provision import installed_ca_bundle, provision
from webhook.tls.rotation import RotationError, RotationRequest
from webhook.tls.secret_layout import (
    CA_SECRET_TYPE,
    TLS_SECRET_TYPE,
    ca_secret_data,
    serving_secret_data,
)

REQUEST = RotationRequest(
    namespace=NAMESPACE, secret="tls", ca_secret="tls-ca", service="hook", propagation_delay=0
)


def installed(ca: CertificateAuthority) -> MemoryStore:
    """A cluster an earlier install left: both Secrets, and caBundles trusting the CA."""
    store = MemoryStore()
    leaf = issue_service_certificate(ca, "hook", NAMESPACE)
    store.secrets["tls"] = (serving_secret_data(leaf, ca), TLS_SECRET_TYPE)
    store.secrets["tls-ca"] = (ca_secret_data(ca), CA_SECRET_TYPE)
    store.bundles = {MUTATING: ca_bundle(ca.certificate), VALIDATING: ca_bundle(ca.certificate)}
    return store


def test_an_empty_cluster_gets_a_ca_and_a_leaf_for_the_service_from_it() -> None:
    store = MemoryStore()

    report = provision(store, REQUEST)

    assert report.lines == [f"created a CA and a serving certificate in {NAMESPACE}/tls"]
    assert store.writes == ["secret tls-ca", "secret tls"]
    assert store.secrets["tls"][1] == TLS_SECRET_TYPE
    assert store.secrets["tls-ca"][1] == CA_SECRET_TYPE
    assert is_issued_by(store.leaf(), store.ca())
    verifier = PolicyBuilder().store(Store([store.ca()]))
    verifier.build_server_verifier(DNSName(f"hook.{NAMESPACE}.svc")).verify(store.leaf(), [])


def test_the_new_certificates_live_as_long_as_asked() -> None:
    store = MemoryStore()

    provision(store, dataclasses.replace(REQUEST, days=30, ca_days=60))

    leaf_days = store.leaf().not_valid_after_utc - dt.datetime.now(dt.UTC)
    ca_days = store.ca().not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=29) < leaf_days <= dt.timedelta(days=30)
    assert dt.timedelta(days=59) < ca_days <= dt.timedelta(days=60)


def test_certificates_that_exist_are_left_to_rotation() -> None:
    ca = create_ca("earlier install")
    store = installed(ca)
    leaf = store.leaf()

    report = provision(store, REQUEST)

    assert store.writes == []
    assert store.leaf() == leaf
    assert any(line.startswith("leaf kept") for line in report.lines)


def test_a_serving_secret_without_its_ca_is_refused_rather_than_reissued() -> None:
    store = installed(create_ca("lost"))
    del store.secrets["tls-ca"]

    with pytest.raises(RotationError, match=f"{NAMESPACE}/tls exists but its CA Secret"):
        provision(store, REQUEST)
    assert store.writes == []


def test_a_first_leaf_needs_the_service_it_is_for() -> None:
    without_service = RotationRequest(namespace=NAMESPACE, secret="tls", ca_secret="tls-ca")

    with pytest.raises(ValueError, match="Service"):
        provision(MemoryStore(), without_service)


def test_the_installed_bundle_trusts_the_current_ca_first_then_those_still_trusted() -> None:
    old, current = create_ca("old"), create_ca("current")
    store = installed(current)
    store.bundles[MUTATING] = ca_bundle(old.certificate, current.certificate)

    bundle = installed_ca_bundle(store, "tls-ca")

    assert decode_ca_bundle(bundle) == [current.certificate, old.certificate]


def test_the_installed_bundle_of_configurations_without_one_is_the_ca_alone() -> None:
    ca = create_ca("only")
    store = installed(ca)
    store.bundles = {MUTATING: "", VALIDATING: ""}

    assert decode_ca_bundle(installed_ca_bundle(store, "tls-ca")) == [ca.certificate]


def test_the_installed_bundle_needs_the_ca_secret() -> None:
    with pytest.raises(RotationError, match=f"the CA Secret {NAMESPACE}/tls-ca does not exist"):
        installed_ca_bundle(MemoryStore(), "tls-ca")
