"""A pod's binding under review: the pod is read, then the claims it names, within one
bounded wait, and the pod judged against them (webhook/http/claim_reader.py,
webhook/engine/binding.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import jsonpatch
import orjson
import pytest
from fastapi.testclient import TestClient

from tests.builders import (
    claim_spec,
    claim_template,
    claiming_container,
    dra_engine,
    pod,
    pod_create,
)
from tests.conftest import admission_review
from webhook.engine import Engine
from webhook.engine.binding import BOUND_POD
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.http.app import create_app
from webhook.http.claim_reader import CONCURRENT_POD_READS, ClaimReader
from webhook.http.review import read_request


def claim(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "ml"},
        "spec": spec,
    }


def binding_review(name: str = "server") -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "binding-1",
                "kind": {"group": "", "version": "v1", "kind": "Binding"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "binding",
                "requestKind": {"group": "", "version": "v1", "kind": "Binding"},
                "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                "requestSubResource": "binding",
                "name": name,
                "namespace": "ml",
                "operation": "CREATE",
                "userInfo": {"username": "system:kube-scheduler"},
                "object": {
                    "kind": "Binding",
                    "apiVersion": "v1",
                    "metadata": {"name": name, "namespace": "ml", "uid": "pod-uid"},
                    "target": {"kind": "Node", "name": "gpu-node-1"},
                },
                "oldObject": None,
                "dryRun": False,
                "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
            },
        }
    )


class Cluster:
    """Namespace ml: the pod `server` sharing claim `shared-gpu`, and the reads asked."""

    def __init__(self, engine: Engine, shared: dict[str, Any], delay: float = 0.0) -> None:
        obj = pod(
            "inference",
            name="server",
            containers=[claiming_container("app", "gpu")],
            resourceClaims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}],
        )
        at_create = ClaimObjects(found={ClaimSource(CLAIM, "shared-gpu"): claim(claim_spec())})
        patch = engine.mutate(pod_create(obj), claims=at_create).patch
        self.objects = {
            ClaimSource(BOUND_POD, "server"): jsonpatch.apply_patch(obj, list(patch)),
            ClaimSource(CLAIM, "shared-gpu"): shared,
        }
        self.reads: list[ClaimSource] = []
        self.delay = delay
        self.lock = threading.Lock()
        self.pods_in_flight = self.most_pods_in_flight = 0

    def read(self, namespace: str, source: ClaimSource) -> Mapping[str, Any] | None:
        with self.lock:
            self.reads.append(source)
            if source.kind == BOUND_POD:
                self.pods_in_flight += 1
                self.most_pods_in_flight = max(self.most_pods_in_flight, self.pods_in_flight)
        time.sleep(self.delay)
        with self.lock:
            if source.kind == BOUND_POD:
                self.pods_in_flight -= 1
        return self.objects.get(source) if namespace == "ml" else None


@pytest.fixture(scope="module")
def dra() -> Engine:
    return dra_engine()


def answer(engine: Engine, cluster: Cluster, body: bytes) -> Any:
    app = create_app(lambda: engine, claims=cluster.read)
    reply = TestClient(app).post("/validate", content=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["response"]


def test_the_pod_and_then_its_claim_are_read_and_an_unchanged_claim_lets_it_bind(
    dra: Engine,
) -> None:
    cluster = Cluster(dra, claim(claim_spec()))

    response = answer(dra, cluster, binding_review())

    assert response["allowed"], response
    assert cluster.reads == [ClaimSource(BOUND_POD, "server"), ClaimSource(CLAIM, "shared-gpu")]


def test_a_claim_made_again_asking_for_nothing_stops_the_binding(dra: Engine) -> None:
    cluster = Cluster(dra, claim({"devices": {"requests": []}}))

    response = answer(dra, cluster, binding_review())

    assert not response["allowed"]
    assert response["status"]["message"].startswith(
        "gpu-admission denied binding of pod 'ml/server' to node 'gpu-node-1'"
    )


def test_a_pod_that_is_gone_is_the_bindings_own_business(dra: Engine) -> None:
    cluster = Cluster(dra, claim(claim_spec()))

    assert answer(dra, cluster, binding_review("gone"))["allowed"]
    assert cluster.reads == [ClaimSource(BOUND_POD, "gone")]


def test_both_rounds_share_one_bounded_wait(dra: Engine) -> None:
    slow = Cluster(dra, claim(claim_spec()), delay=0.3)
    reader = ClaimReader(slow.read, 0.45)
    started = time.perf_counter()

    objects = asyncio.run(reader.objects(dra, read_request(binding_review())))

    assert time.perf_counter() - started < 0.8
    assert ClaimSource(BOUND_POD, "server") in objects.found
    assert set(objects.unreadable) == {ClaimSource(CLAIM, "shared-gpu")}
    assert not dra.validate(read_request(binding_review()), claims=objects).allowed


def test_pods_are_read_few_at_a_time_apart_from_claims(dra: Engine) -> None:
    cluster = Cluster(dra, claim(claim_spec()), delay=0.1)
    reader = ClaimReader(cluster.read, 5.0)
    requests = [read_request(binding_review()) for _ in range(CONCURRENT_POD_READS * 3)]

    async def all_at_once() -> None:
        await asyncio.gather(*(reader.objects(dra, request) for request in requests))

    asyncio.run(all_at_once())

    assert cluster.most_pods_in_flight == CONCURRENT_POD_READS


def test_a_binding_reads_the_template_afresh_though_the_create_just_read_it(
    dra: Engine,
) -> None:
    """The template is read at the pod's CREATE and kept a second for the reviews that
    name it again; the binding, the last check before the pod runs, reads it again."""
    obj = pod("inference", name="server", containers=[claiming_container("app", "gpu")])
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    template = claim_template("one-gpu")
    at_create = ClaimObjects(found={ClaimSource(TEMPLATE, "one-gpu"): template})
    patch = dra.mutate(pod_create(obj), claims=at_create).patch
    objects = {
        ClaimSource(BOUND_POD, "server"): jsonpatch.apply_patch(obj, list(patch)),
        ClaimSource(TEMPLATE, "one-gpu"): template,
    }
    reads: list[ClaimSource] = []

    def read(namespace: str, source: ClaimSource) -> Mapping[str, Any] | None:
        reads.append(source)
        return objects.get(source)

    client = TestClient(create_app(lambda: dra, claims=read))
    created = client.post("/mutate", content=orjson.dumps(admission_review(obj, namespace="ml")))
    bound = client.post("/validate", content=binding_review())

    assert created.json()["response"]["allowed"] and bound.json()["response"]["allowed"]
    assert reads == [
        ClaimSource(TEMPLATE, "one-gpu"),
        ClaimSource(BOUND_POD, "server"),
        ClaimSource(TEMPLATE, "one-gpu"),
    ]
