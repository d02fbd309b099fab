"""The templates and claims pods under review name are read at the edge, each once and at
once, within a bounded wait, and handed to the engine, on the event loop and in the
review worker alike (webhook/http/claim_reader.py, answering.py)."""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections.abc import Mapping
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from tests.builders import (
    claim_spec,
    claim_template,
    claiming_pod,
    container,
    dra_engine,
    pod,
)
from tests.conftest import Review
from webhook.engine import Engine
from webhook.engine.dra.api import TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.env_references import CONFIG_MAP, SECRET, key_names
from webhook.http.app import INLINE_BODY_BYTES, create_app
from webhook.http.claim_reader import CONCURRENT_READS, ClaimReader, ReadClaim
from webhook.http.offload import ReviewWorker
from webhook.http.review import read_request

TEMPLATES = {
    "one-gpu": claim_template("one-gpu"),
    "nine-gpus": claim_template("nine-gpus", claim_spec(count=9)),
}


ENV_OBJECTS = {
    ClaimSource(CONFIG_MAP, "old-env"): key_names({"data": {"NVIDIA_VISIBLE_DEVICES": "all"}}),
    ClaimSource(SECRET, "tokens"): key_names({"data": {"HF_TOKEN": "aGY="}}),
}


class Cluster:
    """The templates of namespace ml, and the reads asked of it."""

    def __init__(self, delay: float = 0.0, error: Exception | None = None) -> None:
        self.reads: list[tuple[str, ClaimSource]] = []
        self.delay = delay
        self.error = error
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0

    def read(self, namespace: str, source: ClaimSource) -> Mapping[str, Any] | None:
        with self.lock:
            self.reads.append((namespace, source))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(self.delay)
        with self.lock:
            self.in_flight -= 1
        if self.error is not None:
            raise self.error
        if namespace != "ml":
            return None
        return (
            ENV_OBJECTS.get(source)
            if source.kind in (CONFIG_MAP, SECRET)
            else TEMPLATES.get(source.name)
        )


@pytest.fixture(scope="module")
def dra() -> Engine:
    return dra_engine()


def answer(engine: Engine, read: ReadClaim, body: bytes, endpoint: str = "/validate") -> Any:
    reply = TestClient(create_app(lambda: engine, claims=read)).post(endpoint, content=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["response"]


def test_a_pod_without_claims_costs_no_read(dra: Engine, review: Review) -> None:
    cluster = Cluster()

    response = answer(dra, cluster.read, orjson.dumps(review(pod("inference", containers=[container(gpus=1)]))), "/mutate")  # fmt: skip

    assert response["allowed"] and cluster.reads == []


def test_the_template_a_pod_names_is_read_in_its_namespace_and_judged(
    dra: Engine, review: Review
) -> None:
    cluster = Cluster()

    response = answer(
        dra, cluster.read, orjson.dumps(review(claiming_pod("training", gpu="nine-gpus")))
    )

    assert not response["allowed"]
    assert "pod claims 9 GPUs" in response["status"]["message"]
    assert cluster.reads == [("ml", ClaimSource(TEMPLATE, "nine-gpus"))]


def test_the_mutation_reads_it_too_and_injects_no_device_plugin_gpu(
    dra: Engine, review: Review
) -> None:
    cluster = Cluster()

    response = answer(dra, cluster.read, orjson.dumps(review(claiming_pod())), "/mutate")

    patch = orjson.loads(base64.b64decode(response["patch"]))
    assert response["allowed"] and cluster.reads
    assert "nvidia.com/gpu" not in orjson.dumps(patch).decode()


def test_a_template_that_does_not_exist_is_refused_naming_it(dra: Engine, review: Review) -> None:
    response = answer(dra, Cluster().read, orjson.dumps(review(claiming_pod(gpu="absent"))))

    assert not response["allowed"]
    assert "claim 'gpu' (ResourceClaimTemplate 'absent') does not exist" in response["status"]["message"]  # fmt: skip


def test_a_read_that_fails_is_refused_with_its_reason(dra: Engine, review: Review) -> None:
    failing = Cluster(error=RuntimeError("connection refused\ntraceback lines"))

    response = answer(dra, failing.read, orjson.dumps(review(claiming_pod())))

    assert not response["allowed"]
    assert "could not be read (connection refused); the policy cannot tell" in response["status"]["message"]  # fmt: skip


def test_a_slow_cluster_costs_the_bounded_wait_not_the_review(dra: Engine, review: Review) -> None:
    slow = Cluster(delay=1.0)
    reader = ClaimReader(slow.read, 0.1)
    request = read_request(orjson.dumps(review(claiming_pod(a="one-gpu", b="nine-gpus"))))
    started = time.perf_counter()

    objects = asyncio.run(reader.objects(dra, request))

    assert time.perf_counter() - started < 0.9
    assert set(objects.unreadable.values()) == {"no answer from the cluster within 0.1 s"}
    assert len(slow.reads) == 2  # both asked at once


def test_the_reads_of_all_reviews_share_threads_of_their_own(dra: Engine, review: Review) -> None:
    cluster = Cluster(delay=0.5)
    reader = ClaimReader(cluster.read, 10.0)
    pods = [claiming_pod(**{f"c{i}": f"t{n}-{i}" for i in range(20)}) for n in range(2)]
    requests = [read_request(orjson.dumps(review(p))) for p in pods]

    async def both() -> list[Any]:
        return list(await asyncio.gather(*(reader.objects(dra, r) for r in requests)))

    answers = asyncio.run(both())

    assert len(cluster.reads) == 40 and all(len(a.missing) == 20 for a in answers)
    assert cluster.most_in_flight == CONCURRENT_READS


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
def test_a_large_pod_is_judged_in_the_worker_with_its_claims_read(
    dra: Engine, worker: ReviewWorker, review: Review, endpoint: str
) -> None:
    sent = claiming_pod("training", gpu="nine-gpus")
    sent["metadata"]["annotations"] = {"padding": "x" * INLINE_BODY_BYTES}
    body = orjson.dumps(review(sent, uid="large-claims"))
    on_the_loop = TestClient(create_app(lambda: dra, claims=Cluster().read))
    cluster = Cluster()
    in_the_worker = TestClient(create_app(lambda: dra, worker=worker, claims=cluster.read))

    expected = on_the_loop.post(endpoint, content=body).json()["response"]
    answered = in_the_worker.post(endpoint, content=body).json()["response"]

    assert answered == expected
    assert cluster.reads == [("ml", ClaimSource(TEMPLATE, "nine-gpus"))]
    if endpoint == "/validate":
        assert "pod claims 9 GPUs" in answered["status"]["message"]


def test_a_template_named_again_within_a_second_is_read_once(dra: Engine, review: Review) -> None:
    cluster = Cluster()
    client = TestClient(create_app(lambda: dra, claims=cluster.read))
    body = orjson.dumps(review(claiming_pod(gpu="one-gpu")))

    first = client.post("/mutate", content=body).json()["response"]
    again = client.post("/mutate", content=body).json()["response"]

    assert first == again and first["allowed"]
    assert cluster.reads == [("ml", ClaimSource(TEMPLATE, "one-gpu"))]


def test_a_template_not_found_is_read_again_at_the_next_review(dra: Engine, review: Review) -> None:
    cluster = Cluster()
    client = TestClient(create_app(lambda: dra, claims=cluster.read))
    body = orjson.dumps(review(claiming_pod(gpu="absent")))

    client.post("/validate", content=body)
    client.post("/validate", content=body)

    assert len(cluster.reads) == 2


def test_a_binding_reads_its_template_afresh(dra: Engine, review: Review) -> None:
    cluster = Cluster()
    reader = ClaimReader(cluster.read, 10.0)
    source = ClaimSource(TEMPLATE, "one-gpu")

    async def reads() -> None:
        await reader.read_all("ml", (source,))
        await reader.read_all("ml", (source,))
        await reader.read_all("ml", (source,), fresh=True)

    asyncio.run(reads())

    assert cluster.reads == [("ml", source), ("ml", source)]


def taking_whole(*references: tuple[str, str]) -> dict[str, Any]:
    fields = {CONFIG_MAP: "configMapRef", SECRET: "secretRef"}
    env_from = [{fields[kind]: {"name": name}} for kind, name in references]
    return pod("inference", containers=[container(gpus=1, envFrom=env_from)])


def test_what_a_gpu_pods_containers_take_whole_is_read_at_validation_and_judged(
    dra: Engine, review: Review
) -> None:
    cluster = Cluster()
    body = orjson.dumps(review(taking_whole((CONFIG_MAP, "old-env"), (SECRET, "tokens"))))

    mutated = answer(dra, cluster.read, body, "/mutate")
    assert cluster.reads == []
    response = answer(dra, cluster.read, body)

    assert mutated["allowed"] and not response["allowed"]
    assert "takes every key of ConfigMap 'old-env'" in response["status"]["message"]
    assert "Secret 'tokens'" not in response["status"]["message"]
    assert sorted(source.kind for _, source in cluster.reads) == [CONFIG_MAP, SECRET]


def test_the_replicas_of_one_template_read_what_they_take_once_a_second(
    dra: Engine, review: Review
) -> None:
    cluster = Cluster()
    client = TestClient(create_app(lambda: dra, claims=cluster.read))
    body = orjson.dumps(review(taking_whole((SECRET, "tokens"))))

    answers = [client.post("/validate", content=body).json()["response"] for _ in range(3)]

    assert "takes every key" not in str(answers)
    assert cluster.reads == [("ml", ClaimSource(SECRET, "tokens"))]
