"""Reading an autoscaler's target from the API server (webhook/kube/targets.py).

Against a stub HTTP server that answers like kube-apiserver: the real client,
the real paths, no cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.json_server import json_server
from webhook.engine.autoscalers import ScaleTarget
from webhook.engine.templates import TemplateKind, template_kinds
from webhook.kube.targets import fetch_scale_target
from webhook.policy import load_default_policy

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "ml"},
    "spec": {"template": {"spec": {"containers": [{"name": "app"}]}}},
}


class Stub:
    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, Any]] = {}
        self.paths: list[str] = []


@pytest.fixture
def stub() -> Iterator[tuple[Stub, Any]]:
    state = Stub()

    def answer(path: str) -> tuple[int, Any]:
        state.paths.append(path)
        return state.answers.get(path, (404, {"kind": "Status", "code": 404}))

    with json_server(answer) as url:
        yield state, client.ApiClient(client.Configuration(host=url))


def target(api_version: str = "apps/v1", kind: str = "Deployment") -> ScaleTarget:
    return ScaleTarget("HorizontalPodAutoscaler", "web-hpa", "ml", api_version, kind, "web", 4)


def test_the_target_is_read_as_json_at_its_groups_path(stub: tuple[Stub, Any]) -> None:
    state, api = stub
    state.answers["/apis/apps/v1/namespaces/ml/deployments/web"] = (200, DEPLOYMENT)

    assert fetch_scale_target(api, target()) == DEPLOYMENT


def test_a_policy_kind_is_read_with_the_plural_the_policy_names(stub: tuple[Stub, Any]) -> None:
    state, api = stub
    kinds = template_kinds(load_default_policy())
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet"}
    path = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ml/leaderworkersets/web"
    state.answers[path] = (200, lws)

    assert fetch_scale_target(api, target(lws["apiVersion"], lws["kind"]), kinds) == lws


def test_a_missing_target_or_an_unserved_kind_is_none(stub: tuple[Stub, Any]) -> None:
    _, api = stub

    assert fetch_scale_target(api, target()) is None


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("v1", "ReplicationController"), ("example.com/v1", "Deployment"), ("", "Deployment")],
)
def test_a_kind_without_a_known_template_is_none_without_asking(
    stub: tuple[Stub, Any], api_version: str, kind: str
) -> None:
    state, api = stub

    assert fetch_scale_target(api, target(api_version, kind)) is None
    assert state.paths == []


def test_a_kind_without_a_plural_is_none_without_asking(stub: tuple[Stub, Any]) -> None:
    state, api = stub
    kinds = (TemplateKind("example.com", "Model", ("/spec/template",)),)

    assert fetch_scale_target(api, target("example.com/v1", "Model"), kinds) is None
    assert state.paths == []


def test_other_api_errors_raise(stub: tuple[Stub, Any]) -> None:
    state, api = stub
    state.answers["/apis/apps/v1/namespaces/ml/deployments/web"] = (403, {"kind": "Status"})

    with pytest.raises(ApiException) as raised:
        fetch_scale_target(api, target())
    assert raised.value.status == 403
