"""Shared fixtures: the default policy, an engine on it, a builder of AdmissionReviews,
and a CA with a serving certificate for localhost for tests of the real server.

Pods and containers are built with `tests.builders`; `review` wraps an object in
an AdmissionReview v1 request the way kube-apiserver sends it (userInfo,
requestKind and options included), as a plain dict ready to be posted as JSON.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from webhook.engine import Engine
from webhook.policy import Policy, load_default_policy
from webhook.tls.files import write_key_pair
from webhook.tls.pki import create_ca, issue_serving_certificate

Review = Callable[..., dict[str, Any]]


def admission_review(
    obj: Any,
    *,
    operation: str = "CREATE",
    uid: str | None = None,
    kind: str = "Pod",
    group: str = "",
    version: str = "v1",
    resource: str = "pods",
    sub_resource: str = "",
    namespace: str = "ml",
    name: str = "",
    old_object: Any = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 request for `obj`; a fresh uid unless one is given."""
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old_object,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": f"{operation.title()}Options"},
    }
    if sub_resource:
        request["subResource"] = sub_resource
        request["requestSubResource"] = sub_resource
    if name:
        request["name"] = name
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.fixture(scope="session")
def policy() -> Policy:
    return load_default_policy()


@pytest.fixture(scope="session")
def engine(policy: Policy) -> Engine:
    return Engine(policy)


@pytest.fixture
def review() -> Review:
    return admission_review


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    cert: Path
    key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = create_ca("gpu-admission test CA")
    serving_pair = issue_serving_certificate(
        ca, "gpu-admission", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
    )
    ca_cert, _ = write_key_pair(directory, "ca", ca)
    cert, key = write_key_pair(directory, "tls", serving_pair)
    return Pki(ca_cert, cert, key)
