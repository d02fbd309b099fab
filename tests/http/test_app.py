"""The HTTP edge (webhook/http/app.py): AdmissionReview in, AdmissionReview out, never a 5xx."""

from __future__ import annotations

import base64
import copy
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import jsonpatch
import pytest
from fastapi.testclient import TestClient

import webhook.http.app
from tests.builders import container, mutated, pod
from webhook.engine import Decision, Engine
from webhook.engine.handlers import Review as HandlerReview
from webhook.engine.inventory import UNKNOWN, Inventory, node_facts
from webhook.http.app import MAX_BODY_BYTES, Readiness, create_app
from webhook.policy import Policy

Review = Callable[..., dict[str, Any]]

ENDPOINTS = ["/mutate", "/validate"]
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
INFERENCE_TOLERATION = {
    "key": "gpu-pool",
    "operator": "Equal",
    "value": "inference",
    "effect": "NoSchedule",
}


@pytest.fixture
def client(engine: Engine) -> TestClient:
    return TestClient(create_app(lambda: engine))


def response_of(reply: Any) -> dict[str, Any]:
    """The `response` of an AdmissionReview reply, after checking the envelope around it."""
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["kind"] == "AdmissionReview"
    assert set(body) == {"apiVersion", "kind", "response"}
    response: dict[str, Any] = body["response"]
    return response


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    operations: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return operations


class TestAllowedReviews:
    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    def test_an_allowed_non_pod_review_gets_exactly_uid_and_allowed_true(
        self, client: TestClient, review: Review, endpoint: str
    ) -> None:
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        sent = review(config_map, kind="ConfigMap", resource="configmaps", uid="cm-uid-1")

        reply = client.post(endpoint, json=sent)

        assert reply.status_code == 200
        assert reply.json() == {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "cm-uid-1", "allowed": True},
        }

    def test_a_cpu_pod_without_a_workload_label_is_allowed_unchanged(
        self, client: TestClient, review: Review
    ) -> None:
        sent = review(pod(containers=[container()]), uid="cpu-uid")

        for endpoint in ENDPOINTS:
            assert response_of(client.post(endpoint, json=sent)) == {
                "uid": "cpu-uid",
                "allowed": True,
            }


class TestMutation:
    def test_an_inference_pod_gets_a_json_patch_with_its_class_placement_and_priority(
        self, client: TestClient, review: Review
    ) -> None:
        response = response_of(client.post("/mutate", json=review(pod("inference"), uid="m-1")))

        assert response["uid"] == "m-1"
        assert response["allowed"] is True
        operations = patch_of(response)
        assert {
            "op": "add",
            "path": "/spec/priorityClassName",
            "value": "inference-priority",
        } in operations
        assert {"op": "add", "path": "/spec/priority", "value": 1000000} in operations
        assert {
            "op": "add",
            "path": "/spec/tolerations",
            "value": [INFERENCE_TOLERATION],
        } in operations
        affinity = next(op for op in operations if op["path"] == "/spec/affinity")
        assert affinity["value"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"] == [
            {"matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": ["inference"]}]}
        ]

    def test_the_patch_applies_to_the_pod_as_sent_and_yields_the_finished_pod(
        self, client: TestClient, review: Review
    ) -> None:
        sent = pod("inference", containers=[container("server")])
        original = copy.deepcopy(sent)

        operations = patch_of(response_of(client.post("/mutate", json=review(sent))))
        patched = jsonpatch.apply_patch(sent, operations)

        assert sent == original, "applying the patch must not need the service's copy"
        annotations = patched["metadata"].pop("annotations")
        assert (
            annotations["gpu-admission.io/injected"] == "affinity,tolerations,priority,gpu-limits"
        )
        assert patched["metadata"] == original["metadata"]
        spec = patched["spec"]
        assert spec["priorityClassName"] == "inference-priority"
        assert spec["priority"] == 1000000
        assert spec["tolerations"] == [INFERENCE_TOLERATION]
        assert spec["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"][0][
            "matchExpressions"
        ] == [{"key": "gpu-pool", "operator": "In", "values": ["inference"]}]
        assert spec["containers"][0]["resources"] == {
            "limits": {"nvidia.com/gpu": "1"},
            "requests": {"nvidia.com/gpu": "1"},
        }

    def test_a_mutated_pod_passes_validation_and_a_second_mutation_adds_nothing(
        self, client: TestClient, review: Review
    ) -> None:
        sent = pod("training", containers=[container(gpus=2)])
        operations = patch_of(response_of(client.post("/mutate", json=review(sent))))
        patched = jsonpatch.apply_patch(sent, operations)

        validated = response_of(client.post("/validate", json=review(patched, uid="v-2")))
        remutated = response_of(client.post("/mutate", json=review(patched, uid="m-2")))

        assert validated == {"uid": "v-2", "allowed": True}
        assert remutated == {"uid": "m-2", "allowed": True}


class TestValidationDenials:
    def test_a_gpu_pod_without_a_class_gets_403_forbidden_naming_the_label_to_set(
        self, client: TestClient, review: Review
    ) -> None:
        sent = review(pod(containers=[container(gpus=1)], name="trainer"), uid="deny-1")

        response = response_of(client.post("/validate", json=sent))

        assert response["uid"] == "deny-1"
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        assert response["status"]["reason"] == "Forbidden"
        message = response["status"]["message"]
        assert "'ml/trainer'" in message
        assert "no label gpu-admission.io/workload" in message
        assert "set it to one of: inference, training" in message
        assert "patch" not in response

    def test_a_denial_is_logged_with_the_uid_and_the_rules_broken(
        self, client: TestClient, review: Review, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="gpu_admission.http")
        env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        sent = review(pod(containers=[container(env=env)]), uid="deny-logged")

        response_of(client.post("/validate", json=sent))

        [record] = [r for r in caplog.records if r.getMessage() == "denied"]
        assert record.__dict__["uid"] == "deny-logged"
        assert record.__dict__["rules"] == ["visible-devices"]


class TestOtherOperations:
    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    @pytest.mark.parametrize(
        ("operation", "sub_resource", "kind"),
        [
            ("UPDATE", "", "Pod"),
            ("DELETE", "", "Pod"),
            ("CONNECT", "exec", "PodExecOptions"),
            ("UPDATE", "status", "Pod"),
            ("CREATE", "binding", "Binding"),
        ],
    )
    def test_reviews_other_than_a_pod_create_are_allowed_without_a_patch(
        self,
        client: TestClient,
        review: Review,
        endpoint: str,
        operation: str,
        sub_resource: str,
        kind: str,
    ) -> None:
        # A GPU pod with no class would be refused at CREATE by /validate and patched
        # by /mutate if it had a class; here neither may happen.
        env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        obj = pod(containers=[container(gpus=1, env=env)])
        sent = review(
            None if operation == "DELETE" else obj,  # kube-apiserver sends only oldObject
            operation=operation,
            sub_resource=sub_resource,
            kind=kind,
            old_object=obj,
        )

        response = response_of(client.post(endpoint, json=sent))

        assert response == {"uid": sent["request"]["uid"], "allowed": True}

    def test_an_ephemeral_container_setting_visible_devices_all_is_denied(
        self, client: TestClient, review: Review
    ) -> None:
        debugger = container("debugger", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
        obj = pod("inference", containers=[container(gpus=1)], ephemeralContainers=[debugger])
        sent = review(obj, operation="UPDATE", sub_resource="ephemeralcontainers", uid="eph-1")

        response = response_of(client.post("/validate", json=sent))

        assert response["uid"] == "eph-1"
        assert response["allowed"] is False
        assert response["status"]["code"] == 403
        assert (
            "ephemeral container 'debugger' sets NVIDIA_VISIBLE_DEVICES=all"
            in (response["status"]["message"])
        )

    def test_an_ephemeral_container_without_visible_devices_is_blinded_then_allowed(
        self, client: TestClient, review: Review
    ) -> None:
        obj = pod("inference", containers=[container(gpus=1)], ephemeralContainers=[container()])
        sent = review(obj, operation="UPDATE", sub_resource="ephemeralcontainers")

        mutation = response_of(client.post("/mutate", json=sent))
        validation = response_of(client.post("/validate", json=sent))

        assert json.loads(base64.b64decode(mutation["patch"])) == [
            {
                "op": "add",
                "path": "/spec/ephemeralContainers/0/env",
                "value": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
            }
        ]
        assert validation == {"uid": sent["request"]["uid"], "allowed": True}


def with_request(**fields: Any) -> dict[str, Any]:
    """A review of a CPU pod whose `request` has `fields` replaced (None removes one)."""
    request: dict[str, Any] = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "object": pod(),
    }
    for key, value in fields.items():
        if value is None:
            del request[key]
        else:
            request[key] = value
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


NOT_A_REVIEW: dict[str, bytes | str] = {
    "not-json": b"{not json",
    "not-utf8": b'{"request": "\xff"}',
    "empty-body": b"",
    "json-array": b"[]",
    "json-string": b'"AdmissionReview"',
    "empty-object": b"{}",
    "no-request": json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    "request-null": json.dumps({**with_request(), "request": None}),
    "no-uid": json.dumps(with_request(uid=None)),
    "empty-uid": json.dumps(with_request(uid="")),
    "uid-a-number": json.dumps(with_request(uid=7)),
    "unknown-operation": json.dumps(with_request(operation="PATCH")),
    "no-kind": json.dumps(with_request(kind=None)),
    "v1beta1": json.dumps({**with_request(), "apiVersion": "admission.k8s.io/v1beta1"}),
    "wrong-kind": json.dumps({**with_request(), "kind": "Pod"}),
}


class TestBodiesThatAreNotReviews:
    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    @pytest.mark.parametrize("body", NOT_A_REVIEW.values(), ids=NOT_A_REVIEW.keys())
    def test_a_body_that_is_not_an_admission_review_v1_gets_http_400_with_an_error(
        self, client: TestClient, endpoint: str, body: bytes | str
    ) -> None:
        reply = client.post(endpoint, content=body, headers={"content-type": "application/json"})

        assert reply.status_code == 400
        assert reply.headers["content-type"] == "application/json"
        assert set(reply.json()) == {"error"}
        assert reply.json()["error"]

    def test_the_400_error_names_the_field_that_is_wrong(self, client: TestClient) -> None:
        v1beta1 = {**with_request(), "apiVersion": "admission.k8s.io/v1beta1"}

        no_uid = client.post("/validate", json=with_request(uid=None)).json()["error"]
        beta = client.post("/validate", json=v1beta1).json()["error"]

        assert "request.uid" in no_uid
        assert "apiVersion" in beta

    def test_a_rejected_body_is_logged_with_the_uid_it_carried(
        self, client: TestClient, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="gpu_admission.http")

        client.post("/validate", json=with_request(uid="u-bad-op", operation="PATCH"))

        [record] = [r for r in caplog.records if r.getMessage() == "invalid admission review"]
        assert record.__dict__["uid"] == "u-bad-op"
        assert "request.operation" in record.__dict__["reason"]


NOT_POD_SHAPED: dict[str, tuple[Any, str]] = {
    "spec-a-list": ({**pod("inference"), "spec": [{"containers": []}]}, "spec: must be a mapping"),
    "containers-null": (
        {**pod("inference"), "spec": {"containers": None}},
        "spec.containers: a pod needs a list of containers",
    ),
    "quantity-a-list": (
        pod("inference", containers=[container(limits={"nvidia.com/gpu": ["1"]})]),
        "spec.containers[0].resources.limits.nvidia.com/gpu: a quantity must be a string",
    ),
    "tolerations-a-string": (
        pod("inference", tolerations="gpu-pool=inference:NoSchedule"),
        "spec.tolerations: must be a list",
    ),
    "object-a-list": ([pod("inference")], "object: must be a mapping"),
    "object-missing": (None, "object: is required"),
    "labels-a-list": (
        {**pod("inference"), "metadata": {"labels": ["gpu-admission.io/workload=inference"]}},
        "metadata.labels: must be a mapping",
    ),
}  # fmt: skip


class TestObjectsThatAreNotPods:
    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    @pytest.mark.parametrize(("obj", "where"), NOT_POD_SHAPED.values(), ids=NOT_POD_SHAPED.keys())
    def test_a_malformed_pod_gets_http_200_allowed_false_code_400_naming_the_field(
        self, client: TestClient, review: Review, endpoint: str, obj: Any, where: str
    ) -> None:
        sent = review(obj, uid="malformed-uid")

        response = response_of(client.post(endpoint, json=sent))

        assert response["uid"] == "malformed-uid"
        assert response["allowed"] is False
        assert response["status"]["code"] == 400
        assert response["status"]["reason"] == "BadRequest"
        assert where in response["status"]["message"]
        assert "patch" not in response


def review_of_size(size: int) -> bytes:
    """A valid review of a CPU pod, padded with an annotation to exactly `size` bytes."""
    padded = pod()
    padded["metadata"]["annotations"] = {"padding": ""}
    empty = json.dumps(with_request(object=padded)).encode()
    assert len(empty) <= size, "size too small for a review"
    padded["metadata"]["annotations"]["padding"] = "x" * (size - len(empty))
    body = json.dumps(with_request(object=padded)).encode()
    assert len(body) == size
    return body


class TestBodySize:
    LIMIT = 1024

    @pytest.fixture
    def small(self, engine: Engine) -> TestClient:
        return TestClient(create_app(lambda: engine, max_body_bytes=self.LIMIT))

    def test_a_review_of_exactly_the_cap_is_answered(self, small: TestClient) -> None:
        reply = small.post("/validate", content=review_of_size(self.LIMIT))

        assert response_of(reply) == {"uid": "u-1", "allowed": True}

    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    def test_a_review_one_byte_over_the_cap_gets_413(
        self, small: TestClient, endpoint: str
    ) -> None:
        reply = small.post(endpoint, content=review_of_size(self.LIMIT + 1))

        assert reply.status_code == 413
        assert reply.json() == {"error": "request body exceeds 1024 bytes"}

    @pytest.mark.parametrize(("size", "status"), [(LIMIT, 200), (LIMIT + 1, 413), (4 * LIMIT, 413)])
    def test_a_chunked_body_without_content_length_is_cut_off_at_the_cap(
        self, small: TestClient, size: int, status: int
    ) -> None:
        body = review_of_size(size)

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(body), 100):
                yield body[start : start + 100]

        reply = small.post("/validate", content=chunks())

        assert "content-length" not in reply.request.headers
        assert reply.status_code == status

    def test_a_declared_content_length_over_the_cap_gets_413_before_reading(
        self, small: TestClient
    ) -> None:
        reply = small.post(
            "/validate", content=b"{}", headers={"content-length": str(self.LIMIT + 1)}
        )

        assert reply.status_code == 413

    def test_by_default_a_review_as_large_as_kube_apiserver_sends_is_answered(
        self, client: TestClient
    ) -> None:
        three_mebibytes = 3 * 1024 * 1024
        assert three_mebibytes < MAX_BODY_BYTES

        reply = client.post("/validate", content=review_of_size(three_mebibytes))

        assert response_of(reply) == {"uid": "u-1", "allowed": True}


def crash(self: Engine, handler: str, review: HandlerReview) -> Decision:
    raise RuntimeError("rule crashed on purpose")


class FailingEngine(Engine):
    """An engine whose every review raises, as a bug in a rule would."""

    def answer(self, handler: str, review: HandlerReview) -> Decision:
        raise RuntimeError("rule crashed on purpose")


class TestEngineFailures:
    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    def test_an_engine_exception_becomes_allowed_false_code_500_with_the_uid_logged(
        self,
        client: TestClient,
        review: Review,
        caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch,
        endpoint: str,
    ) -> None:
        monkeypatch.setattr(Engine, "answer", crash)

        response = response_of(client.post(endpoint, json=review(pod("inference"), uid="boom-1")))

        assert response["uid"] == "boom-1"
        assert response["allowed"] is False
        assert response["status"]["code"] == 500
        assert response["status"]["reason"] == "InternalError"
        assert "crashed on purpose" not in response["status"]["message"]
        assert "patch" not in response
        [record] = [r for r in caplog.records if r.getMessage() == "engine failed"]
        assert record.__dict__["uid"] == "boom-1"
        assert record.levelno == logging.ERROR
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], RuntimeError)

    @pytest.mark.parametrize("endpoint", ENDPOINTS)
    def test_the_engine_the_factory_returns_is_the_one_that_judges(
        self, policy: Policy, review: Review, endpoint: str
    ) -> None:
        failing = FailingEngine(policy)
        client = TestClient(create_app(lambda: failing))

        response = response_of(client.post(endpoint, json=review(pod("inference"), uid="boom-2")))

        assert (response["uid"], response["allowed"], response["status"]["code"]) == (
            "boom-2",
            False,
            500,
        )

    def test_an_engine_that_cannot_be_built_is_answered_like_an_engine_exception(
        self, review: Review
    ) -> None:
        def no_engine() -> Engine:
            raise RuntimeError("policy vanished")

        client = TestClient(create_app(no_engine))

        response = response_of(client.post("/validate", json=review(pod(), uid="boom-3")))

        assert (response["uid"], response["allowed"], response["status"]["code"]) == (
            "boom-3",
            False,
            500,
        )


class TestProbes:
    def test_healthz_answers_200(self, client: TestClient) -> None:
        reply = client.get("/healthz")

        assert reply.status_code == 200
        assert reply.json() == {"status": "ok"}

    def test_readyz_answers_200_with_the_detail_of_each_check(self, engine: Engine) -> None:
        readiness = Readiness(checks={"policy": lambda: (True, "policies/default.yaml")})
        client = TestClient(create_app(lambda: engine, readiness))

        reply = client.get("/readyz")

        assert reply.status_code == 200
        assert reply.json() == {
            "ready": True,
            "checks": {"policy": {"ok": True, "detail": "policies/default.yaml"}},
        }

    def test_readyz_answers_503_when_any_check_fails(self, engine: Engine) -> None:
        readiness = Readiness(
            checks={
                "policy": lambda: (True, "policies/default.yaml"),
                "certificate": lambda: (False, "tls.crt expired"),
            }
        )
        client = TestClient(create_app(lambda: engine, readiness))

        reply = client.get("/readyz")

        assert reply.status_code == 503
        assert reply.json()["ready"] is False
        assert reply.json()["checks"]["certificate"] == {"ok": False, "detail": "tls.crt expired"}


class TestInventory:
    def test_each_review_is_judged_on_the_inventory_the_app_is_given(
        self, engine: Engine, review: Review
    ) -> None:
        facts = node_facts(
            {
                "metadata": {
                    "name": "gpu-node-07",
                    "labels": {"gpu-pool": "training", "nvidia-gpu-model": "A100"},
                },
                "status": {"allocatable": {"nvidia.com/gpu": "4"}},
            }
        )
        assert facts is not None
        current = {"inventory": UNKNOWN}
        client = TestClient(create_app(lambda: engine, inventory=lambda: current["inventory"]))
        a100 = {"gpu-admission.io/gpu-model": "A100"}
        eight = mutated(engine, pod("training", containers=[container(gpus=8)], labels=a100))

        before = response_of(client.post("/validate", json=review(eight, uid="before")))
        current["inventory"] = Inventory(nodes=(facts,))
        after = response_of(client.post("/validate", json=review(eight, uid="after")))

        assert before["allowed"] is True
        assert after["allowed"] is False
        assert "has 4 allocatable now (node gpu-node-07)" in after["status"]["message"]


def training_deployment(gpus: int) -> dict[str, Any]:
    a100 = {"gpu-admission.io/gpu-model": "A100"}
    template = pod("training", containers=[container(gpus=gpus)], labels=a100)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"template": {"metadata": template["metadata"], "spec": template["spec"]}},
    }


def hpa(max_replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "trainer"},
            "maxReplicas": max_replicas,
        },
    }


class TestAutoscalers:
    @pytest.fixture
    def four_gpus(self) -> Inventory:
        facts = node_facts(
            {
                "metadata": {
                    "name": "gpu-node-07",
                    "labels": {"gpu-pool": "training", "nvidia-gpu-model": "A100"},
                },
                "status": {"allocatable": {"nvidia.com/gpu": "4"}},
            }
        )
        assert facts is not None
        return Inventory(nodes=(facts,))

    def hpa_review(self, review: Review, max_replicas: int) -> dict[str, Any]:
        return review(
            hpa(max_replicas),
            kind="HorizontalPodAutoscaler",
            group="autoscaling",
            version="v2",
            resource="horizontalpodautoscalers",
            name="trainer",
        )

    def test_the_workload_an_autoscaler_targets_is_read_and_a_warning_returned(
        self, engine: Engine, review: Review, four_gpus: Inventory
    ) -> None:
        asked: list[str] = []

        def read(target: Any, kinds: Any) -> dict[str, Any]:
            asked.append(f"{target.namespace}/{target.kind}/{target.name}")
            return training_deployment(2)

        app = create_app(lambda: engine, inventory=lambda: four_gpus, scaled_workloads=read)
        response = response_of(TestClient(app).post("/validate", json=self.hpa_review(review, 3)))

        assert asked == ["ml/Deployment/trainer"]
        assert response["allowed"] is True
        [warning] = response["warnings"]
        assert "replicas beyond 2 could never schedule" in warning

    def test_a_target_that_cannot_be_read_admits_the_autoscaler_without_a_warning(
        self, engine: Engine, review: Review, four_gpus: Inventory, caplog: pytest.LogCaptureFixture
    ) -> None:
        def read(target: Any, kinds: Any) -> dict[str, Any]:
            raise RuntimeError("403 Forbidden")

        app = create_app(lambda: engine, inventory=lambda: four_gpus, scaled_workloads=read)
        with caplog.at_level(logging.WARNING, logger="gpu_admission.http"):
            response = response_of(
                TestClient(app).post("/validate", json=self.hpa_review(review, 3))
            )

        assert response["allowed"] is True
        assert "warnings" not in response
        assert "cannot read the workload an autoscaler targets" in caplog.text

    def test_a_target_slower_than_the_review_allows_is_given_up_on(
        self,
        engine: Engine,
        review: Review,
        four_gpus: Inventory,
        caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setattr(webhook.http.app, "SCALED_WORKLOAD_SECONDS", 0.2)
        released = threading.Event()

        def read(target: Any, kinds: Any) -> dict[str, Any]:
            released.wait(5)  # an apiserver that does not answer
            return training_deployment(2)

        app = create_app(lambda: engine, inventory=lambda: four_gpus, scaled_workloads=read)
        try:
            with caplog.at_level(logging.WARNING, logger="gpu_admission.http"):
                response = response_of(
                    TestClient(app).post("/validate", json=self.hpa_review(review, 3))
                )
        finally:
            released.set()

        assert response["allowed"] is True
        assert "warnings" not in response
        [record] = [r for r in caplog.records if "autoscaler targets" in r.getMessage()]
        assert record.reason == "TimeoutError"  # type: ignore[attr-defined]

    def test_pods_are_never_looked_up(
        self, engine: Engine, review: Review, four_gpus: Inventory
    ) -> None:
        asked: list[Any] = []

        def read(target: Any, kinds: Any) -> dict[str, Any]:
            asked.append(target)
            return training_deployment(2)

        app = create_app(lambda: engine, inventory=lambda: four_gpus, scaled_workloads=read)
        response = response_of(TestClient(app).post("/validate", json=review(pod("inference"))))

        assert asked == []
        assert response["uid"]
