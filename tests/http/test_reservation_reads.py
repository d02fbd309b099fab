"""A claim's reservation for a pod under review at /validate-reservations: the pod is read,
then the claims it names, and the pod judged with the claim as the update makes it
(webhook/http/claim_reader.py, webhook/engine/handlers/reservations.py)."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.testclient import TestClient

from tests.builders import claim_spec, dra_engine
from tests.http.test_binding_reads import Cluster, claim
from webhook.engine.binding import BOUND_POD
from webhook.engine.dra.api import CLAIM
from webhook.engine.dra.claims import ClaimSource
from webhook.http.app import create_app

DRA = dra_engine()


def reservation_review(spec: dict[str, Any], pod_uid: str = "pod-uid") -> bytes:
    """kube-scheduler's status update of claim `shared-gpu`, reserving it for `server`."""
    old = claim(spec)
    new = {
        **claim(spec),
        "status": {
            "allocation": {"devices": {"results": []}},
            "reservedFor": [{"resource": "pods", "name": "server", "uid": pod_uid}],
        },
    }
    kind = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}
    resource = {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"}
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "reservation-1",
                "kind": kind,
                "resource": resource,
                "subResource": "status",
                "requestKind": kind,
                "requestResource": resource,
                "requestSubResource": "status",
                "name": "shared-gpu",
                "namespace": "ml",
                "operation": "UPDATE",
                "userInfo": {"username": "system:kube-scheduler"},
                "object": new,
                "oldObject": old,
                "dryRun": False,
                "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"},
            },
        }
    )


def answer(cluster: Cluster, body: bytes) -> Any:
    reply = TestClient(create_app(lambda: DRA, claims=cluster.read)).post(
        "/validate-reservations", content=body
    )
    assert reply.status_code == 200, reply.text
    return reply.json()["response"]


def served_pod(cluster: Cluster) -> None:
    cluster.objects[ClaimSource(BOUND_POD, "server")]["metadata"]["uid"] = "pod-uid"


def test_the_pod_reserved_and_its_claims_are_read_and_a_claim_of_its_gpu_is_reserved() -> None:
    cluster = Cluster(DRA, claim(claim_spec()))
    served_pod(cluster)

    response = answer(cluster, reservation_review(claim_spec()))

    assert response["allowed"], response
    assert cluster.reads == [ClaimSource(BOUND_POD, "server"), ClaimSource(CLAIM, "shared-gpu")]


def test_a_claim_made_again_asking_for_nothing_is_not_reserved_for_a_class_pod() -> None:
    cluster = Cluster(DRA, claim(claim_spec()))
    served_pod(cluster)

    response = answer(cluster, reservation_review({"devices": {"requests": []}}))

    assert not response["allowed"]
    assert response["status"]["message"].startswith(
        "gpu-admission denied reservation of claim 'ml/shared-gpu' for pod 'server'"
    )
