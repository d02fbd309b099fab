"""Each webhook at a route of its own (webhook/http/app.py), made from the handler registry;
and reviews sent to `/mutate` or `/validate` by configurations installed before each
webhook had its own path, answered as at their own webhook's."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.builders import container, pod
from tests.conftest import Review
from webhook.engine import Engine
from webhook.engine.handlers import HANDLERS
from webhook.http.app import create_app


@pytest.fixture
def client(engine: Engine) -> TestClient:
    return TestClient(create_app(lambda: engine))


def configmap_review(review: Review, key: str) -> dict[str, Any]:
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "ml"},
        "data": {key: "all"},
    }
    return review(configmap, kind="ConfigMap", resource="configmaps", name="settings")


def answer(client: TestClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = client.post(path, json=body)
    assert reply.status_code == 200
    response: dict[str, Any] = reply.json()["response"]
    return response


def test_every_webhook_has_a_route_at_its_path(client: TestClient) -> None:
    paths = {getattr(route, "path", None) for route in client.app.router.routes}  # type: ignore[attr-defined]

    assert {handler.path for handler in HANDLERS} <= paths
    assert len(HANDLERS) == 13


def test_a_training_jobs_template_is_mutated_at_mutate_workloads(
    client: TestClient, review: Review
) -> None:
    template = pod("training")
    del template["apiVersion"], template["kind"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"template": template},
    }
    body = review(job, kind="Job", group="batch", resource="jobs", name="train")

    mutated = answer(client, "/mutate-workloads", body)

    assert mutated["allowed"] is True
    assert mutated["patchType"] == "JSONPatch"


def test_a_configmap_with_a_device_request_key_is_refused_at_its_own_path_and_at_validate(
    client: TestClient, review: Review
) -> None:
    own = answer(client, "/validate-env-keys", configmap_review(review, "NVIDIA_VISIBLE_DEVICES"))
    before = answer(client, "/validate", configmap_review(review, "NVIDIA_VISIBLE_DEVICES"))

    assert own["allowed"] is False and before["allowed"] is False
    assert own["status"]["message"] == before["status"]["message"]
    assert "NVIDIA_VISIBLE_DEVICES" in own["status"]["message"]
    assert answer(client, "/validate-env-keys", configmap_review(review, "LOG_LEVEL"))["allowed"]


def test_a_gpu_pod_of_no_class_is_judged_alike_at_validate_unclassed_and_at_validate(
    client: TestClient, review: Review
) -> None:
    gpu_pod = pod(None, containers=[container(gpus=1)])

    own = answer(client, "/validate-unclassed", review(gpu_pod))
    before = answer(client, "/validate", review(gpu_pod))

    assert own == {**before, "uid": own["uid"]}


def test_a_review_no_handler_of_the_route_s_side_judges_is_admitted(
    client: TestClient, review: Review
) -> None:
    configmap = configmap_review(review, "NVIDIA_VISIBLE_DEVICES")

    assert answer(client, "/mutate", configmap) == {
        "uid": configmap["request"]["uid"],
        "allowed": True,
    }
