"""The ResourceClaimTemplates and ResourceClaims among the documents, as the pods among them
find them (webhook/offline/claim_documents.py)."""

from __future__ import annotations

from typing import Any

from tests.builders import claim_spec, claim_template
from webhook.engine.dra.api import CLAIM, TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import NO_CLAIMS, NOT_GIVEN
from webhook.offline.claim_documents import (
    ClaimDocuments,
    as_v1,
    is_claim_object,
    unread_version,
)

ONE_GPU = ClaimSource(TEMPLATE, "one-gpu")


def template_in(namespace: str | None, count: int | None = None) -> dict[str, Any]:
    obj = claim_template("one-gpu", claim_spec(count=count))
    if namespace is None:
        del obj["metadata"]["namespace"]
    else:
        obj["metadata"]["namespace"] = namespace
    return obj


def v1beta1(kind: str = TEMPLATE) -> dict[str, Any]:
    request = {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": []}
    devices = {"devices": {"requests": [request]}}
    return {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": kind,
        "metadata": {"name": "two"},
        "spec": {"spec": devices} if kind == TEMPLATE else devices,
    }


class TestWhatIsAClaimObject:
    def test_templates_and_claims_of_any_version_are_claim_objects_and_nothing_else(
        self,
    ) -> None:
        assert is_claim_object(claim_template("t"))
        assert is_claim_object({"apiVersion": "resource.k8s.io/v1alpha3", "kind": CLAIM})
        assert not is_claim_object({"apiVersion": "v1", "kind": "Pod"})
        assert not is_claim_object({"apiVersion": "example.com/v1", "kind": TEMPLATE})

    def test_a_kind_that_is_no_string_is_no_claim_object(self) -> None:
        for kind in ([CLAIM], {CLAIM: 1}, None, 3):
            assert not is_claim_object({"apiVersion": "resource.k8s.io/v1", "kind": kind})

    def test_a_version_whose_layout_is_not_read_says_which_are(self) -> None:
        obj = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": TEMPLATE}

        assert unread_version(claim_template("t")) is None
        assert unread_version(obj) == (
            "resource.k8s.io/v1alpha3 ResourceClaimTemplate is not read: only v1, v1beta2, v1beta1"
        )


class TestVersions:
    def test_a_v1_object_is_sent_as_it_is(self) -> None:
        obj = claim_template("t")

        assert as_v1(obj) is obj

    def test_a_v1beta2_object_is_sent_as_v1_unchanged_otherwise(self) -> None:
        obj = {**claim_template("t"), "apiVersion": "resource.k8s.io/v1beta2"}

        assert as_v1(obj) == claim_template("t")

    def test_a_v1beta1_request_is_moved_under_exactly_as_kube_apiserver_converts_it(
        self,
    ) -> None:
        for kind in (TEMPLATE, CLAIM):
            sent = as_v1(v1beta1(kind))
            spec = sent["spec"]["spec"] if kind == TEMPLATE else sent["spec"]

            assert sent["apiVersion"] == "resource.k8s.io/v1"
            assert spec["devices"]["requests"] == [
                {
                    "name": "gpu",
                    "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": []},
                }
            ]

    def test_converting_leaves_the_document_read_untouched(self) -> None:
        obj = v1beta1()

        as_v1(obj)

        assert obj == v1beta1()

    def test_a_v1beta1_object_of_the_wrong_shape_is_left_for_reading_to_refuse(self) -> None:
        obj = {**v1beta1(), "spec": {"spec": {"devices": {"requests": "all"}}}}

        assert as_v1(obj)["spec"] == obj["spec"]


class TestNamespaces:
    def test_an_object_is_seen_from_its_own_namespace_only(self) -> None:
        documents = ClaimDocuments.of([template_in("ml")])

        assert ONE_GPU in documents.seen_from("ml").found
        assert documents.seen_from("serving") is NO_CLAIMS
        assert documents.seen_from("") is NO_CLAIMS

    def test_an_object_without_a_namespace_is_seen_from_every_namespace(self) -> None:
        documents = ClaimDocuments.of([template_in(None)])

        assert ONE_GPU in documents.seen_from("ml").found
        assert ONE_GPU in documents.seen_from("").found

    def test_one_of_the_pods_namespace_wins_over_one_without(self) -> None:
        documents = ClaimDocuments.of([template_in("ml", count=2), template_in(None, count=3)])

        found = documents.seen_from("ml").found[ONE_GPU]

        assert found["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2

    def test_of_two_of_one_name_the_later_is_kept_as_kubectl_apply_leaves_it(self) -> None:
        documents = ClaimDocuments.of([template_in("ml", count=2), template_in("ml", count=3)])

        found = documents.seen_from("ml").found[ONE_GPU]

        assert found["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 3

    def test_an_object_not_among_them_is_not_given_rather_than_missing(self) -> None:
        seen = ClaimDocuments.of([template_in("ml")]).seen_from("ml")

        assert seen.reason_unknown(ClaimSource(TEMPLATE, "other")) == NOT_GIVEN

    def test_objects_of_other_kinds_unread_versions_or_without_a_name_are_left_out(
        self,
    ) -> None:
        unnamed = template_in("ml")
        unnamed["metadata"] = {"generateName": "one-", "namespace": "ml"}
        alpha = {**template_in("ml"), "apiVersion": "resource.k8s.io/v1alpha3"}
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one-gpu"}}

        assert ClaimDocuments.of([unnamed, alpha, pod]).seen_from("ml") is NO_CLAIMS

    def test_objects_are_found_as_v1(self) -> None:
        found = ClaimDocuments.of([v1beta1()]).seen_from("ml").found

        assert found[ClaimSource(TEMPLATE, "two")]["apiVersion"] == "resource.k8s.io/v1"
