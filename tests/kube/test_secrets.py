"""The certificate Secrets and caBundles in a cluster (webhook/kube/secrets.py), through
the real client against a fake kube-apiserver."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kube.fake_apiserver import FakeApiServer, serving
from webhook.kube.secrets import KubeCertificateStore

SECRETS = "/api/v1/namespaces/gpu/secrets"
GROUP = "/apis/admissionregistration.k8s.io/v1"
MUTATING = f"{GROUP}/mutatingwebhookconfigurations/hooks"
VALIDATING = f"{GROUP}/validatingwebhookconfigurations/hooks"
LABELS = {"app.kubernetes.io/name": "someone"}


def webhook(name: str, bundle: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {"url": "https://example.com", "caBundle": bundle},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
    }


def configuration(kind: str, *webhooks: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "hooks"},
        "webhooks": list(webhooks),
    }


def encoded(value: bytes) -> str:
    return base64.b64encode(value).decode()


@pytest.fixture
def fake() -> FakeApiServer:
    return FakeApiServer()


@pytest.fixture
def store(fake: FakeApiServer) -> Iterator[KubeCertificateStore]:
    with serving(fake) as api:
        yield KubeCertificateStore(api, "gpu", "hooks", labels=LABELS)


def test_a_secret_it_creates_carries_the_labels_it_was_given(
    fake: FakeApiServer, store: KubeCertificateStore
) -> None:
    store.write_secret("tls", {"tls.crt": b"certificate"}, "kubernetes.io/tls")

    secret = fake.objects[f"{SECRETS}/tls"]
    assert secret["metadata"]["labels"] == LABELS
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["data"] == {"tls.crt": encoded(b"certificate")}


def test_a_secret_is_read_back_as_bytes_and_a_missing_one_as_none(
    store: KubeCertificateStore,
) -> None:
    store.write_secret("tls", {"tls.crt": b"\x00binary\xff"}, "kubernetes.io/tls")

    assert store.read_secret("tls") == {"tls.crt": b"\x00binary\xff"}
    assert store.read_secret("elsewhere") is None


def test_writing_an_existing_secret_replaces_its_data_and_keeps_the_rest(
    fake: FakeApiServer, store: KubeCertificateStore
) -> None:
    fake.put(
        f"{SECRETS}/tls",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "tls", "namespace": "gpu", "labels": {"kept": "yes"}},
            "type": "kubernetes.io/tls",
            "data": {"tls.crt": encoded(b"old")},
        },
    )

    store.write_secret("tls", {"tls.crt": b"new"}, "kubernetes.io/tls")

    secret = fake.objects[f"{SECRETS}/tls"]
    assert secret["data"] == {"tls.crt": encoded(b"new")}
    assert secret["metadata"]["labels"] == {"kept": "yes"}


def test_a_secret_write_that_loses_the_race_is_made_again(
    fake: FakeApiServer, store: KubeCertificateStore
) -> None:
    fake.put(f"{SECRETS}/tls", {"metadata": {"name": "tls"}, "data": {}})
    fake.interlopers = 1

    store.write_secret("tls", {"tls.crt": b"new"}, "kubernetes.io/tls")

    assert store.read_secret("tls") == {"tls.crt": b"new"}
    assert fake.requests.count(f"PUT {SECRETS}/tls") == 2


def test_the_ca_bundles_are_keyed_by_kind_configuration_and_webhook(
    fake: FakeApiServer, store: KubeCertificateStore
) -> None:
    fake.put(MUTATING, configuration("MutatingWebhookConfiguration", webhook("m.io", "AAAA")))

    assert store.read_ca_bundles() == {"MutatingWebhookConfiguration/hooks/m.io": "AAAA"}


def test_only_configurations_whose_bundles_change_are_written(
    fake: FakeApiServer, store: KubeCertificateStore
) -> None:
    fake.put(MUTATING, configuration("MutatingWebhookConfiguration", webhook("m.io", "AAAA")))
    fake.put(VALIDATING, configuration("ValidatingWebhookConfiguration", webhook("v.io", "AAAA")))

    store.write_ca_bundles({"ValidatingWebhookConfiguration/hooks/v.io": "BBBB"})

    assert store.read_ca_bundles() == {
        "MutatingWebhookConfiguration/hooks/m.io": "AAAA",
        "ValidatingWebhookConfiguration/hooks/v.io": "BBBB",
    }
    assert [r for r in fake.requests if r.startswith("PUT")] == [f"PUT {VALIDATING}"]
