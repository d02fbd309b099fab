"""A pod's binding, judged against its claims as the scheduler allocated them
(webhook/engine/binding.py, Engine.claim_sources and validate)."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import claim_spec, claiming_container, dra_engine, pod, pod_create
from webhook.engine import AdmissionRequest, Engine
from webhook.engine.binding import BOUND_POD, binding_sources, is_pod_binding, pod_as_bound
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, ClaimObjects

POD = ClaimSource(BOUND_POD, "server")
SHARED = ClaimSource(CLAIM, "shared-gpu")


@pytest.fixture(scope="module")
def engine() -> Engine:
    return dra_engine()


def binding(name: str = "server", node: str = "gpu-node-1") -> AdmissionRequest:
    """kube-scheduler's binding of pod `name`, as kube-apiserver sends it for review."""
    return pod_create(
        {
            "kind": "Binding",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "ml", "uid": "pod-uid"},
            "target": {"kind": "Node", "name": node},
        },
        kind="Binding",
        subresource="binding",
        name=name,
    )


def claim(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


def sharing_pod(workload: str | None = "inference") -> dict[str, Any]:
    """A pod whose container uses the shared claim `shared-gpu`."""
    return pod(
        workload,
        name="server",
        containers=[claiming_container("app", "gpu")],
        resourceClaims=[{"name": "gpu", "resourceClaimName": "shared-gpu"}],
    )


def admitted_as_created(engine: Engine, obj: dict[str, Any], claims: ClaimObjects) -> Any:
    """The pod as kube-apiserver stores it: mutated, then validated, at its CREATE."""
    mutation = engine.mutate(pod_create(obj), claims=claims)
    assert mutation.allowed, mutation.message
    stored = jsonpatch.apply_patch(obj, list(mutation.patch))
    decision = engine.validate(pod_create(stored), claims=claims)
    assert decision.allowed, decision.message
    return stored


def read(pod_object: Any, *claims: dict[str, Any]) -> ClaimObjects:
    found: dict[ClaimSource, Any] = {POD: pod_object}
    found |= {ClaimSource(c["kind"], c["metadata"]["name"]): c for c in claims}
    return ClaimObjects(found=found)


ONE_GPU = claim("shared-gpu", claim_spec())
NOTHING = claim("shared-gpu", {"devices": {"requests": []}})
A_NIC = claim("shared-gpu", claim_spec("nic.example.com"))


class TestWhatABindingNeedsRead:
    def test_a_binding_is_the_create_of_the_pods_binding_subresource(self) -> None:
        assert is_pod_binding(binding())
        assert not is_pod_binding(pod_create(sharing_pod()))

    def test_first_the_pod_then_the_claims_it_names(self, engine: Engine) -> None:
        assert engine.claim_sources(binding()) == (POD,)
        assert engine.claim_sources(binding(), read(sharing_pod())) == (POD, SHARED)

    def test_a_pod_not_found_needs_nothing_more(self) -> None:
        gone = ClaimObjects(missing=frozenset({POD}))

        assert binding_sources(binding(), gone) == (POD,)

    def test_a_claim_made_from_a_template_is_read_by_the_name_in_the_pods_status(
        self,
    ) -> None:
        obj = pod(
            "inference",
            name="server",
            containers=[claiming_container("app", "gpu")],
            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        )
        assert binding_sources(binding(), read(obj)) == (POD, ClaimSource(TEMPLATE, "one-gpu"))

        obj["status"] = {
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "server-gpu-x7"}]
        }

        assert binding_sources(binding(), read(obj)) == (POD, ClaimSource(CLAIM, "server-gpu-x7"))
        assert pod_as_bound(obj)["spec"]["resourceClaims"] == [
            {"name": "gpu", "resourceClaimName": "server-gpu-x7"}
        ]


class TestTheBindingOfAClassPod:
    def test_is_admitted_while_its_shared_claim_still_asks_for_its_gpu(
        self, engine: Engine
    ) -> None:
        stored = admitted_as_created(engine, sharing_pod(), read(None, ONE_GPU))

        decision = engine.validate(binding(), claims=read(stored, ONE_GPU))

        assert decision.allowed, decision.message

    @pytest.mark.parametrize("swapped", [NOTHING, A_NIC], ids=["nothing", "a-nic"])
    def test_is_refused_once_its_claim_was_made_again_asking_for_no_gpu(
        self, engine: Engine, swapped: dict[str, Any]
    ) -> None:
        stored = admitted_as_created(engine, sharing_pod(), read(None, ONE_GPU))

        decision = engine.validate(binding(), claims=read(stored, swapped))

        assert not decision.allowed
        assert decision.message.startswith(
            "gpu-admission denied binding of pod 'ml/server' to node 'gpu-node-1', judged by "
            "its claims as the scheduler allocated them: "
        )
        assert "inference pod requests no GPU" in decision.message
        assert decision.message.endswith("or create the pod again")

    def test_is_refused_when_its_template_claim_was_replaced_by_one_asking_for_nothing(
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
        stored = admitted_as_created(
            engine, obj, ClaimObjects(found={ClaimSource(TEMPLATE, "one-gpu"): template})
        )
        stored["status"] = {
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "server-gpu-x7"}]
        }
        made_again = claim("server-gpu-x7", {"devices": {"requests": []}})

        assert not engine.validate(binding(), claims=read(stored, made_again)).allowed

    def test_is_refused_when_the_pod_could_not_be_read(self, engine: Engine) -> None:
        unread = ClaimObjects(unreadable={POD: "no answer from the cluster within 2 s"})

        decision = engine.validate(binding(), claims=unread)

        assert not decision.allowed
        assert "the pod could not be read (no answer from the cluster within 2 s)" in (
            decision.message
        )
        assert decision.outcome == "error"

    def test_is_refused_when_its_claim_is_gone(self, engine: Engine) -> None:
        stored = admitted_as_created(engine, sharing_pod(), read(None, ONE_GPU))
        gone = ClaimObjects(found={POD: stored}, missing=frozenset({SHARED}))

        assert not engine.validate(binding(), claims=gone).allowed


class TestBindingsLeftAlone:
    def test_a_pod_without_claims_is_not_judged_again(self, engine: Engine) -> None:
        """Everything but its claims was judged at its CREATE (or at the update that
        changed it); a policy edited since does not hold its scheduling up."""
        plain = pod(None, name="server", containers=[{"name": "app", "image": "app"}])
        plain["spec"]["tolerations"] = [{"key": "gpu-pool", "operator": "Exists"}]

        assert engine.validate(binding(), claims=read(plain)).allowed

    def test_a_pod_that_is_gone_or_was_not_looked_for(self, engine: Engine) -> None:
        assert engine.validate(binding(), claims=ClaimObjects(missing=frozenset({POD}))).allowed
        assert engine.validate(binding(), claims=NO_CLAIMS).allowed

    def test_a_pod_of_no_class_sharing_a_claim_of_another_device(self, engine: Engine) -> None:
        obj = sharing_pod(None)

        assert engine.validate(binding(), claims=read(obj, A_NIC)).allowed
