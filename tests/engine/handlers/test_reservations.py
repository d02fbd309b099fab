"""A claim's reservation for a pod, kube-scheduler's status update before it binds the pod:
the pod judged again against its claims as the scheduler allocated them
(webhook/engine/handlers/reservations.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.builders import claim_spec, claiming_container, dra_engine, pod, pod_create
from tests.engine.test_binding import (
    NOTHING,
    ONE_GPU,
    POD,
    SHARED,
    admitted_as_created,
    read,
    sharing_pod,
)
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.engine.handlers import HANDLERS, Review
from webhook.engine.handlers.twins import reserves_a_pod

RESERVED = {"resource": "pods", "name": "server", "uid": "pod-uid"}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return dra_engine()


def reservation(
    claim: dict[str, Any], *reserved: dict[str, Any], before: Any = ()
) -> AdmissionRequest:
    """kube-scheduler's status update of `claim`: allocated, reserved for `reserved`."""
    old = copy.deepcopy(claim)
    if before:
        old["status"] = {"reservedFor": list(before)}
    new = copy.deepcopy(claim)
    new["status"] = {"allocation": {"devices": {"results": []}}, "reservedFor": list(reserved)}
    return pod_create(
        new,
        operation="UPDATE",
        group="resource.k8s.io",
        kind="ResourceClaim",
        resource="resourceclaims",
        subresource="status",
        name=claim["metadata"]["name"],
        old_object=old,
    )


def with_uid(obj: dict[str, Any], uid: str = "pod-uid") -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


def judged(engine: Engine, request: AdmissionRequest, claims: ClaimObjects) -> Decision:
    """The answer of the validate-reservations webhook, with `claims` read for it."""
    return engine.answer("validate-reservations", Review(request, claims=claims))


class TestWhatAReservationNeedsRead:
    def test_first_the_pod_reserved_then_the_claims_it_names(self, engine: Engine) -> None:
        request = reservation(ONE_GPU, RESERVED)

        assert engine.claim_sources(request, handler="validate-reservations") == (POD,)
        found = read(sharing_pod(), ONE_GPU)
        assert engine.claim_sources(request, found, "validate-reservations") == (POD, SHARED)

    def test_a_pod_reserved_before_is_not_read_again(self, engine: Engine) -> None:
        request = reservation(ONE_GPU, RESERVED, {"resource": "pods", "name": "x", "uid": "u"},
                              before=[RESERVED])  # fmt: skip

        assert engine.claim_sources(request, handler="validate-reservations") == (
            ClaimSource("Pod", "x"),
        )

    def test_its_condition_sends_only_updates_that_reserve_a_pod(self) -> None:
        policy = dra_engine().policy
        assert reserves_a_pod(policy, reservation(ONE_GPU, RESERVED))
        assert not reserves_a_pod(policy, reservation(ONE_GPU, RESERVED, before=[RESERVED]))
        assert not reserves_a_pod(policy, reservation(ONE_GPU))


class TestTheReservationForAClassPod:
    def test_is_admitted_while_its_claim_asks_for_its_gpu(self, engine: Engine) -> None:
        stored = with_uid(admitted_as_created(engine, sharing_pod(), read(None, ONE_GPU)))

        decision = judged(engine, reservation(ONE_GPU, RESERVED), read(stored))

        assert decision.allowed, decision.message

    def test_is_refused_once_its_claim_was_made_again_asking_for_nothing(
        self, engine: Engine
    ) -> None:
        stored = with_uid(admitted_as_created(engine, sharing_pod(), read(None, ONE_GPU)))

        decision = judged(engine, reservation(NOTHING, RESERVED), read(stored, ONE_GPU))

        assert not decision.allowed
        assert decision.message.startswith(
            "gpu-admission denied reservation of claim 'ml/shared-gpu' for pod 'server', "
            "judged by its claims as the scheduler allocated them: "
        )
        assert "inference pod requests no GPU" in decision.message

    def test_judges_the_claim_as_the_update_makes_it_not_as_read(self, engine: Engine) -> None:
        stored = with_uid(admitted_as_created(engine, sharing_pod(), read(None, ONE_GPU)))
        unread_claim = ClaimObjects(found={POD: stored}, unreadable={SHARED: "timed out"})

        assert judged(engine, reservation(ONE_GPU, RESERVED), unread_claim).allowed

    def test_is_refused_when_the_pod_could_not_be_read(self, engine: Engine) -> None:
        unread = ClaimObjects(unreadable={POD: "no answer from the cluster within 2 s"})

        decision = judged(engine, reservation(ONE_GPU, RESERVED), unread)

        assert not decision.allowed
        assert decision.outcome == "error"
        assert "pod 'server' could not be read" in decision.message

    def test_a_template_claim_made_again_is_judged_by_the_name_in_the_pods_status(
        self, engine: Engine
    ) -> None:
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"spec": claim_spec()},
        }
        obj = pod(
            "inference",
            name="server",
            containers=[claiming_container("app", "gpu")],
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        )
        stored = with_uid(
            admitted_as_created(
                engine, obj, ClaimObjects(found={ClaimSource(TEMPLATE, "one-gpu"): template})
            )
        )
        stored["status"] = {
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "server-gpu-x7"}]
        }
        made_again = copy.deepcopy(NOTHING)
        made_again["metadata"]["name"] = "server-gpu-x7"

        decision = judged(engine, reservation(made_again, RESERVED), read(stored))

        assert not decision.allowed
        assert ClaimSource(CLAIM, "server-gpu-x7").name in decision.message


class TestReservationsLeftAlone:
    def test_for_a_pod_that_is_gone_or_another_under_its_name(self, engine: Engine) -> None:
        other = with_uid(sharing_pod(), "another-uid")

        assert judged(engine, reservation(NOTHING, RESERVED), read(other)).allowed
        gone = ClaimObjects(missing=frozenset({POD}))
        assert judged(engine, reservation(NOTHING, RESERVED), gone).allowed

    def test_for_a_pod_of_no_class_with_a_claim_of_another_device(self, engine: Engine) -> None:
        nic = copy.deepcopy(ONE_GPU)
        nic["spec"] = claim_spec("nic.example.com")
        plain = with_uid(sharing_pod(None))

        assert judged(engine, reservation(nic, RESERVED), read(plain)).allowed


def test_the_binding_webhook_is_retired_routed_but_never_installed() -> None:
    bindings = HANDLERS.named("validate-bindings")

    assert bindings.retired
    assert bindings not in HANDLERS.validating()
    assert HANDLERS.named("validate-reservations") in HANDLERS.validating()
