"""Writes that may race with someone else's (webhook/kube/writes.py) and the certificate
Secrets and caBundles written that way (webhook/kube/secrets.py), against the real
kube-apiserver.

The project's client is built from the admin kubeconfig and its every request is
recorded (``Traffic``): method, path, status and the resourceVersion read or sent. To
make a write lose a race for real, ``Traffic.interlope`` has someone else write the
object through kubectl right after the project's client has read it, so the
replacement that follows carries a resourceVersion that is no longer current and
kube-apiserver answers 409. Refusals come from kube-apiserver's own authorizer: the
client impersonates a user no RBAC rule grants anything.

The Secrets live in a namespace of the module; each test has webhook configurations of
its own, deleted afterwards. Their webhooks have no rules, so no request of the
session's other tests is ever sent to them.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from webhook.kube.api_errors import ApiException, api_error_message
from webhook.kube.client import api_client, apply_webhook_configurations
from webhook.kube.secrets import KubeCertificateStore
from webhook.kube.writes import ATTEMPTS
from webhook.tls.pki import ca_bundle, create_ca

from .controlplane import ControlPlane

GROUP = "/apis/admissionregistration.k8s.io/v1"
MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
LABELS = {"app.kubernetes.io/name": "someone"}
NOBODY = "e2e-kube-writes-nobody"
"""A user no RBAC rule mentions: kube-apiserver forbids every request made as them."""

BUNDLE_A = ca_bundle(create_ca("kube writes CA A").certificate)
BUNDLE_B = ca_bundle(create_ca("kube writes CA B").certificate)


# --- the project's client, its requests recorded ------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    status: int
    resource_version: str | None
    """For a read the object's resourceVersion, for a replacement the one it carried."""

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.status}"


@dataclass
class Traffic:
    """The project's client (``api_client``), with every request it sends recorded.

    ``interlope`` makes someone else write an object right after this client reads it.
    """

    api: Any
    requests: list[Request] = field(default_factory=list)
    _interlopers: dict[str, tuple[int, Callable[[int], None]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        send = self.api.call_api

        # The signature of ApiClient.call_api, through which every request goes.
        def call_api(
            method: str,
            url: str,
            header_params: Any = None,
            body: Any = None,
            post_params: Any = None,
            _request_timeout: Any = None,
        ) -> Any:
            response = send(method, url, header_params, body, post_params, _request_timeout)
            path = urlsplit(url).path
            version = None
            if method == "GET" and response.status == 200:
                version = json.loads(response.read())["metadata"]["resourceVersion"]
            elif method == "PUT" and isinstance(body, dict):
                version = body["metadata"].get("resourceVersion")
            self.requests.append(Request(method, path, response.status, version))
            if method == "GET":
                self._after_read(path)
            return response

        self.api.call_api = call_api

    def interlope(self, path: str, write: Callable[[int], None], times: int = 1) -> None:
        """After each of the next ``times`` reads of ``path``, ``write(n)`` (n from 1)."""
        self._interlopers[path] = (times, write)

    def _after_read(self, path: str) -> None:
        left, write = self._interlopers.get(path, (0, None))
        if write is None or left == 0:
            return
        self._interlopers[path] = (left - 1, write)
        write(len([r for r in self.requests if r.method == "GET" and r.path == path]))

    def on(self, path: str) -> list[Request]:
        return [request for request in self.requests if request.path == path]

    def writes(self) -> list[str]:
        return [str(request) for request in self.requests if request.method != "GET"]


@pytest.fixture
def traffic(controlplane: ControlPlane) -> Iterator[Traffic]:
    api = api_client(controlplane.kubeconfig)
    try:
        yield Traffic(api)
    finally:
        api.close()


@pytest.fixture
def nobody(controlplane: ControlPlane) -> Iterator[Any]:
    """The project's client, every request of it made as ``NOBODY``."""
    api = api_client(controlplane.kubeconfig)
    api.set_default_header("Impersonate-User", NOBODY)
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="module")
def namespace(controlplane: ControlPlane) -> Iterator[str]:
    name = controlplane.create_namespace("e2e-kube-writes")
    try:
        yield name
    finally:
        controlplane.delete_namespace(name, wait=False)


@pytest.fixture
def hooks(controlplane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A name for the test's Mutating- and ValidatingWebhookConfiguration, removed after."""
    test = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = f"e2e-writes-{test}"[:63].rstrip("-")
    try:
        yield name
    finally:
        controlplane.kubectl(
            "delete",
            "mutatingwebhookconfiguration,validatingwebhookconfiguration",
            name,
            "--ignore-not-found",
        )


# --- objects, as someone else writes and reads them ---------------------------------------------


def create(controlplane: ControlPlane, obj: dict[str, Any], namespace: str | None = None) -> str:
    """Create ``obj`` as the admin; return its resourceVersion."""
    args = ["create", "--filename=-", "--output=json"]
    if namespace is not None:
        args += ["--namespace", namespace]
    created = controlplane.kubectl(*args, input=json.dumps(obj)).stdout
    version: str = json.loads(created)["metadata"]["resourceVersion"]
    return version


@dataclass
class Annotator:
    """Someone else writing an object: ``interloper=write-<n>`` on it, a new value each
    time so that each is a real update. ``versions`` are the resourceVersions it made."""

    controlplane: ControlPlane
    kind: str
    name: str
    namespace: str | None = None
    versions: list[str] = field(default_factory=list)

    def __call__(self, n: int) -> None:
        where = [] if self.namespace is None else ["--namespace", self.namespace]
        changed = self.controlplane.kubectl(
            "annotate", self.kind, self.name, f"interloper=write-{n}", "--overwrite",
            "--output=json", *where,
        ).stdout  # fmt: skip
        self.versions.append(json.loads(changed)["metadata"]["resourceVersion"])


def configuration(kind: str, name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, **metadata},
        "webhooks": [],
    }


def configuration_path(kind: str, name: str) -> str:
    return f"{GROUP}/{kind.lower()}s/{name}"


def webhook(name: str, bundle: str) -> dict[str, Any]:
    """A webhook with no rules: kube-apiserver never calls it."""
    return {
        "name": name,
        "clientConfig": {"url": "https://127.0.0.1:9/never", "caBundle": bundle},
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
    }


def with_webhooks(kind: str, name: str, *webhooks: dict[str, Any]) -> dict[str, Any]:
    return dict(configuration(kind, name), webhooks=list(webhooks))


def secret_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets/{name}"


def encoded(value: bytes) -> str:
    return base64.b64encode(value).decode()


def forbidden(verb: str, resource: str, where: str) -> str:
    """kube-apiserver's one line when RBAC grants ``NOBODY`` nothing."""
    return f'403 Forbidden: {resource} is forbidden: User "{NOBODY}" cannot {verb} {where}'


# --- writes.py: the webhook configurations `install` applies -------------------------------------


def test_missing_configurations_are_created(
    controlplane: ControlPlane, traffic: Traffic, hooks: str
) -> None:
    apply_webhook_configurations(
        traffic.api,
        configuration(MUTATING, hooks, labels={"new": "yes"}),
        configuration(VALIDATING, hooks, labels={"new": "yes"}),
    )

    for kind in (MUTATING, VALIDATING):
        assert controlplane.get_json(kind, hooks)["metadata"]["labels"] == {"new": "yes"}
    assert traffic.writes() == [
        f"POST {GROUP}/mutatingwebhookconfigurations 201",
        f"POST {GROUP}/validatingwebhookconfigurations 201",
    ]


def test_existing_configurations_are_replaced_whole_on_top_of_the_version_read(
    controlplane: ControlPlane, traffic: Traffic, hooks: str
) -> None:
    created = {
        kind: create(controlplane, configuration(kind, hooks, labels={"old": "yes"}))
        for kind in (MUTATING, VALIDATING)
    }
    uid = controlplane.get_json(MUTATING, hooks)["metadata"]["uid"]

    apply_webhook_configurations(
        traffic.api,
        configuration(MUTATING, hooks, labels={"new": "yes"}),
        configuration(VALIDATING, hooks, labels={"new": "yes"}),
    )

    mutating = controlplane.get_json(MUTATING, hooks)
    assert mutating["metadata"]["labels"] == {"new": "yes"}
    assert mutating["metadata"]["uid"] == uid, "replaced, not deleted and created again"
    for kind in (MUTATING, VALIDATING):
        path = configuration_path(kind, hooks)
        assert [(r.method, r.status, r.resource_version) for r in traffic.on(path)] == [
            ("GET", 200, created[kind]),
            ("PUT", 200, created[kind]),
        ]
    assert traffic.writes() == [
        f"PUT {configuration_path(MUTATING, hooks)} 200",
        f"PUT {configuration_path(VALIDATING, hooks)} 200",
    ]


def test_a_write_that_loses_the_race_is_made_again_on_a_fresh_read(
    controlplane: ControlPlane, traffic: Traffic, hooks: str
) -> None:
    first = create(controlplane, configuration(MUTATING, hooks, labels={"old": "yes"}))
    create(controlplane, configuration(VALIDATING, hooks))
    path = configuration_path(MUTATING, hooks)
    interloper = Annotator(controlplane, MUTATING, hooks)
    traffic.interlope(path, interloper)

    apply_webhook_configurations(
        traffic.api,
        configuration(MUTATING, hooks, labels={"new": "yes"}),
        configuration(VALIDATING, hooks, labels={"new": "yes"}),
    )

    [interloped] = interloper.versions
    assert [(r.method, r.status, r.resource_version) for r in traffic.on(path)] == [
        ("GET", 200, first),
        ("PUT", 409, first),
        ("GET", 200, interloped),
        ("PUT", 200, interloped),
    ]
    mutating = controlplane.get_json(MUTATING, hooks)
    # The configuration is replaced whole: install's body, the interloper's annotation gone.
    assert mutating["metadata"]["labels"] == {"new": "yes"}
    assert "interloper" not in (mutating["metadata"].get("annotations") or {})


def test_a_create_that_loses_the_race_replaces_what_appeared_meanwhile(
    controlplane: ControlPlane, traffic: Traffic, hooks: str
) -> None:
    path = configuration_path(MUTATING, hooks)

    def appear(n: int) -> None:
        create(controlplane, configuration(MUTATING, hooks, labels={"interloper": "yes"}))

    traffic.interlope(path, appear)

    apply_webhook_configurations(
        traffic.api,
        configuration(MUTATING, hooks, labels={"new": "yes"}),
        configuration(VALIDATING, hooks, labels={"new": "yes"}),
    )

    assert [str(r) for r in traffic.requests][:4] == [
        f"GET {path} 404",
        f"POST {GROUP}/mutatingwebhookconfigurations 409",
        f"GET {path} 200",
        f"PUT {path} 200",
    ]
    assert controlplane.get_json(MUTATING, hooks)["metadata"]["labels"] == {"new": "yes"}


def test_a_write_that_keeps_losing_gives_up_with_the_conflict(
    controlplane: ControlPlane, traffic: Traffic, hooks: str
) -> None:
    create(controlplane, configuration(MUTATING, hooks))
    interloper = Annotator(controlplane, MUTATING, hooks)
    traffic.interlope(configuration_path(MUTATING, hooks), interloper, times=ATTEMPTS)

    with pytest.raises(ApiException) as raised:
        apply_webhook_configurations(
            traffic.api,
            configuration(MUTATING, hooks, labels={"new": "yes"}),
            configuration(VALIDATING, hooks, labels={"new": "yes"}),
        )

    assert raised.value.status == 409
    assert api_error_message(raised.value) == (
        "409 Conflict: Operation cannot be fulfilled on mutatingwebhookconfigurations."
        f'admissionregistration.k8s.io "{hooks}": the object has been modified; please apply '
        "your changes to the latest version and try again"
    )
    assert traffic.writes() == [f"PUT {configuration_path(MUTATING, hooks)} 409"] * ATTEMPTS
    mutating = controlplane.get_json(MUTATING, hooks)
    assert mutating["metadata"]["annotations"]["interloper"] == f"write-{ATTEMPTS}"
    assert "labels" not in mutating["metadata"]
    assert not controlplane.exists(VALIDATING, hooks), "nothing after the write given up"


def test_a_refused_write_is_not_retried_and_says_why_in_one_line(
    controlplane: ControlPlane, nobody: Any, hooks: str
) -> None:
    traffic = Traffic(nobody)

    with pytest.raises(ApiException) as raised:
        apply_webhook_configurations(
            nobody, configuration(MUTATING, hooks), configuration(VALIDATING, hooks)
        )

    assert raised.value.status == 403
    assert [str(r) for r in traffic.requests] == [f"GET {configuration_path(MUTATING, hooks)} 403"]
    assert api_error_message(raised.value) == forbidden(
        "get",
        f'mutatingwebhookconfigurations.admissionregistration.k8s.io "{hooks}"',
        'resource "mutatingwebhookconfigurations" in API group "admissionregistration.k8s.io" '
        "at the cluster scope",
    )
    assert not controlplane.exists(MUTATING, hooks)


# --- secrets.py: the Secrets and caBundles of certificate rotation -----------------------------


def store_of(
    traffic: Traffic, namespace: str, hooks: str = "no-such-hooks"
) -> KubeCertificateStore:
    return KubeCertificateStore(traffic.api, namespace, hooks, labels=LABELS)


def test_a_secret_it_creates_carries_the_labels_and_type_it_was_given(
    controlplane: ControlPlane, traffic: Traffic, namespace: str
) -> None:
    store = store_of(traffic, namespace)

    store.write_secret(
        "created", {"tls.crt": b"certificate", "tls.key": b"key"}, "kubernetes.io/tls"
    )

    secret = controlplane.get_json("secret", "created", namespace)
    assert secret["metadata"]["labels"] == LABELS
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["data"] == {"tls.crt": encoded(b"certificate"), "tls.key": encoded(b"key")}
    assert traffic.writes() == [f"POST /api/v1/namespaces/{namespace}/secrets 201"]


def test_a_secret_is_read_back_as_bytes_and_a_missing_one_as_none(
    traffic: Traffic, namespace: str
) -> None:
    store = store_of(traffic, namespace)
    store.write_secret("binary", {"data": b"\x00binary\xff"}, "Opaque")

    assert store.read_secret("binary") == {"data": b"\x00binary\xff"}
    assert store.read_secret("elsewhere") is None
    assert store.where("binary") == f"{namespace}/binary"


def test_writing_an_existing_secret_replaces_its_data_and_keeps_the_rest(
    controlplane: ControlPlane, traffic: Traffic, namespace: str
) -> None:
    first = create(
        controlplane,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kept", "labels": {"kept": "yes"}},
            "type": "Opaque",
            "data": {"old": encoded(b"old"), "ca.crt": encoded(b"old CA")},
        },
        namespace,
    )

    store_of(traffic, namespace).write_secret("kept", {"ca.crt": b"new CA"}, "Opaque")

    secret = controlplane.get_json("secret", "kept", namespace)
    assert secret["data"] == {"ca.crt": encoded(b"new CA")}
    assert secret["metadata"]["labels"] == {"kept": "yes"}, "not the labels of a new Secret"
    assert [(r.method, r.status, r.resource_version) for r in traffic.requests] == [
        ("GET", 200, first),
        ("PUT", 200, first),
    ]


def test_a_secret_write_that_loses_the_race_is_made_again_keeping_both_changes(
    controlplane: ControlPlane, traffic: Traffic, namespace: str
) -> None:
    first = create(
        controlplane,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "raced"}, "data": {}},
        namespace,
    )
    interloper = Annotator(controlplane, "secret", "raced", namespace)
    path = secret_path(namespace, "raced")
    traffic.interlope(path, interloper)

    store_of(traffic, namespace).write_secret("raced", {"tls.crt": b"new"}, "Opaque")

    [interloped] = interloper.versions
    assert [(r.method, r.status, r.resource_version) for r in traffic.on(path)] == [
        ("GET", 200, first),
        ("PUT", 409, first),
        ("GET", 200, interloped),
        ("PUT", 200, interloped),
    ]
    secret = controlplane.get_json("secret", "raced", namespace)
    assert secret["data"] == {"tls.crt": encoded(b"new")}
    assert secret["metadata"]["annotations"]["interloper"] == "write-1"


def test_a_secret_write_that_keeps_losing_gives_up_with_the_conflict(
    controlplane: ControlPlane, traffic: Traffic, namespace: str
) -> None:
    create(
        controlplane,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "contested"}, "data": {}},
        namespace,
    )
    path = secret_path(namespace, "contested")
    interloper = Annotator(controlplane, "secret", "contested", namespace)
    traffic.interlope(path, interloper, times=ATTEMPTS)

    with pytest.raises(ApiException) as raised:
        store_of(traffic, namespace).write_secret("contested", {"tls.crt": b"new"}, "Opaque")

    assert raised.value.status == 409
    assert api_error_message(raised.value) == (
        '409 Conflict: Operation cannot be fulfilled on secrets "contested": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    assert traffic.writes() == [f"PUT {path} 409"] * ATTEMPTS
    assert "data" not in controlplane.get_json("secret", "contested", namespace)


def test_a_secret_deleted_between_the_read_and_the_write_is_not_retried(
    controlplane: ControlPlane, traffic: Traffic, namespace: str
) -> None:
    create(
        controlplane,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vanishing"}, "data": {}},
        namespace,
    )
    path = secret_path(namespace, "vanishing")
    traffic.interlope(
        path,
        lambda n: controlplane.kubectl("delete", "secret", "vanishing", "--namespace", namespace),
    )

    with pytest.raises(ApiException) as raised:
        store_of(traffic, namespace).write_secret("vanishing", {"tls.crt": b"new"}, "Opaque")

    assert api_error_message(raised.value) == '404 Not Found: secrets "vanishing" not found'
    assert [str(r) for r in traffic.requests] == [f"GET {path} 200", f"PUT {path} 404"]
    assert not controlplane.exists("secret", "vanishing", namespace)


def test_a_refused_secret_read_is_passed_on_with_kube_apiservers_reason(
    nobody: Any, namespace: str
) -> None:
    store = KubeCertificateStore(nobody, namespace, "no-such-hooks", labels=LABELS)

    with pytest.raises(ApiException) as raised:
        store.write_secret("tls", {"tls.crt": b"new"}, "Opaque")

    assert raised.value.status == 403
    assert api_error_message(raised.value) == forbidden(
        "get", 'secrets "tls"', f'resource "secrets" in API group "" in the namespace "{namespace}"'
    )


def test_the_ca_bundles_are_keyed_by_kind_configuration_and_webhook(
    controlplane: ControlPlane, traffic: Traffic, namespace: str, hooks: str
) -> None:
    create(controlplane, with_webhooks(MUTATING, hooks, webhook("m.example.com", BUNDLE_A)))

    bundles = store_of(traffic, namespace, hooks).read_ca_bundles()

    # No ValidatingWebhookConfiguration: it has no bundles, and is no error.
    assert bundles == {f"{MUTATING}/{hooks}/m.example.com": BUNDLE_A}
    assert [str(r) for r in traffic.requests] == [
        f"GET {configuration_path(MUTATING, hooks)} 200",
        f"GET {configuration_path(VALIDATING, hooks)} 404",
    ]


def test_configurations_that_do_not_exist_are_left_alone(
    controlplane: ControlPlane, traffic: Traffic, namespace: str, hooks: str
) -> None:
    store = store_of(traffic, namespace, hooks)

    store.write_ca_bundles({f"{VALIDATING}/{hooks}/v.example.com": BUNDLE_B})

    assert store.read_ca_bundles() == {}
    assert traffic.writes() == []
    assert not controlplane.exists(VALIDATING, hooks)


def test_only_configurations_whose_bundles_change_are_written(
    controlplane: ControlPlane, traffic: Traffic, namespace: str, hooks: str
) -> None:
    create(controlplane, with_webhooks(MUTATING, hooks, webhook("m.example.com", BUNDLE_A)))
    create(
        controlplane,
        with_webhooks(
            VALIDATING,
            hooks,
            webhook("v.example.com", BUNDLE_A),
            webhook("other.example.com", BUNDLE_A),
        ),
    )
    store = store_of(traffic, namespace, hooks)

    store.write_ca_bundles(
        {
            f"{MUTATING}/{hooks}/m.example.com": BUNDLE_A,
            f"{VALIDATING}/{hooks}/v.example.com": BUNDLE_B,
        }
    )

    assert store.read_ca_bundles() == {
        f"{MUTATING}/{hooks}/m.example.com": BUNDLE_A,
        f"{VALIDATING}/{hooks}/v.example.com": BUNDLE_B,
        f"{VALIDATING}/{hooks}/other.example.com": BUNDLE_A,
    }
    assert traffic.writes() == [f"PUT {configuration_path(VALIDATING, hooks)} 200"]


def test_a_ca_bundle_write_that_loses_the_race_is_made_again_keeping_both_changes(
    controlplane: ControlPlane, traffic: Traffic, namespace: str, hooks: str
) -> None:
    first = create(
        controlplane, with_webhooks(VALIDATING, hooks, webhook("v.example.com", BUNDLE_A))
    )
    path = configuration_path(VALIDATING, hooks)
    interloper = Annotator(controlplane, VALIDATING, hooks)
    traffic.interlope(path, interloper)
    store = store_of(traffic, namespace, hooks)

    store.write_ca_bundles({f"{VALIDATING}/{hooks}/v.example.com": BUNDLE_B})

    [interloped] = interloper.versions
    assert [(r.method, r.status, r.resource_version) for r in traffic.on(path)] == [
        ("GET", 200, first),
        ("PUT", 409, first),
        ("GET", 200, interloped),
        ("PUT", 200, interloped),
    ]
    validating = controlplane.get_json(VALIDATING, hooks)
    assert validating["webhooks"][0]["clientConfig"]["caBundle"] == BUNDLE_B
    assert validating["metadata"]["annotations"]["interloper"] == "write-1"
