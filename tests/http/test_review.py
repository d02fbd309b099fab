"""The AdmissionReview v1 envelope (webhook/http/review.py): parsing it and building responses."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import container, mutated, pod
from webhook.engine import Decision, Engine, Violation
from webhook.http.review import (
    InvalidReview,
    complete,
    errored,
    parse_review,
    plain_request,
    read_request,
    request_uid,
    to_engine_request,
)
from webhook.policy.load import default_policy_text, load_policy_text

Review = Callable[..., dict[str, Any]]


def encoded(value: Any) -> bytes:
    return json.dumps(value).encode()


class TestParseReview:
    def test_a_review_as_kube_apiserver_sends_it_is_read_with_its_aliases(
        self, review: Review
    ) -> None:
        obj = pod("inference")
        sent = review(
            obj,
            operation="UPDATE",
            uid="705ab4f5-6393-11e8-b7cc-42010a800002",
            sub_resource="ephemeralcontainers",
            name="p",
            old_object={"kind": "Pod"},
        )
        sent["request"]["dryRun"] = True

        parsed = parse_review(encoded(sent))

        request = parsed.request
        assert parsed.api_version == "admission.k8s.io/v1"
        assert request.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
        assert request.operation == "UPDATE"
        assert (request.kind.group, request.kind.version, request.kind.kind) == ("", "v1", "Pod")
        assert request.resource.resource == "pods"
        assert request.sub_resource == "ephemeralcontainers"
        assert (request.namespace, request.name) == ("ml", "p")
        assert request.object == obj
        assert request.old_object == {"kind": "Pod"}
        assert request.dry_run is True

    def test_fields_this_service_does_not_read_are_ignored(self, review: Review) -> None:
        sent = review(pod(), uid="u")
        sent["request"]["userInfo"]["extra"] = {"scopes": ["a"]}
        sent["request"]["someFutureField"] = {"x": 1}
        sent["someFutureField"] = 1

        assert parse_review(encoded(sent)).request.uid == "u"

    def test_optional_fields_default_to_empty_when_absent(self) -> None:
        minimal = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "u",
                "kind": {"kind": "Pod"},
                "resource": {"resource": "pods"},
                "operation": "DELETE",
            },
        }

        request = parse_review(encoded(minimal)).request

        assert (request.kind.group, request.kind.version) == ("", "")
        assert (request.sub_resource, request.name, request.namespace) == ("", "", "")
        assert (request.object, request.old_object, request.dry_run) == (None, None, False)

    @pytest.mark.parametrize(
        ("body", "problem"),
        [
            (b"{", "body is not JSON"),
            (b"\xff\xfe", "body is not JSON"),
            (b"[]", "body is not a JSON object"),
            (b"null", "body is not a JSON object"),
            (b"{}", "request: Field required"),
            (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}', "request:"),
        ],
        ids=["truncated", "not-utf8", "array", "null", "empty-object", "no-request"],
    )
    def test_a_body_that_is_not_a_review_raises_invalid_review_saying_why(
        self, body: bytes, problem: str
    ) -> None:
        with pytest.raises(InvalidReview, match=problem):
            parse_review(body)

    @pytest.mark.parametrize(
        ("change", "field"),
        [
            ({"apiVersion": "admission.k8s.io/v1beta1"}, "apiVersion"),
            ({"kind": "Pod"}, "kind"),
            ({"request": {"uid": ""}}, "request.uid"),
            ({"request": {"uid": None}}, "request.uid"),
            ({"request": {"uid": 42}}, "request.uid"),
            ({"request": {"operation": "PATCH"}}, "request.operation"),
            ({"request": {"kind": None}}, "request.kind"),
            ({"request": {"resource": {"group": ""}}}, "request.resource.resource"),
        ],
        ids=[
            "v1beta1", "wrong-kind", "empty-uid", "null-uid", "numeric-uid",
            "unknown-operation", "no-kind", "resource-without-name",
        ],
    )  # fmt: skip
    def test_a_wrong_envelope_field_is_named_in_the_error(
        self, review: Review, change: dict[str, Any], field: str
    ) -> None:
        sent = review(pod(), uid="u")
        for key, value in change.items():
            if isinstance(value, dict):
                sent[key].update(value)
            else:
                sent[key] = value

        with pytest.raises(InvalidReview) as raised:
            parse_review(encoded(sent))

        assert str(raised.value).startswith("not an AdmissionReview admission.k8s.io/v1: ")
        assert f"{field}:" in str(raised.value)

    @given(st.binary(max_size=200))
    def test_any_bytes_either_parse_or_raise_invalid_review(self, body: bytes) -> None:
        with contextlib.suppress(InvalidReview):
            parse_review(body)


ODD_VALUES = st.sampled_from(
    [None, 0, 1, 7, 1.0, True, False, "", "true", "1", "CREATE", "Pod", [], ["x"], {}, {"x": 1}]
)
"""Values of the wrong type, or that pydantic's lax mode would convert."""

NAMES = st.sampled_from(["", "v1", "apps", "Pod", "pods", "status", "ephemeralcontainers"])
OBJECTS = st.sampled_from([None, {}, {"kind": "Pod"}, [1], "x", 3])
FIELDS = {
    (): ["apiVersion", "kind", "request", "api_version"],
    ("request",): [
        "uid", "kind", "resource", "subResource", "name", "namespace", "operation", "object",
        "oldObject", "dryRun", "sub_resource", "old_object", "dry_run", "userInfo",
    ],
    ("request", "kind"): ["group", "version", "kind"],
    ("request", "resource"): ["group", "version", "resource"],
}  # fmt: skip
"""Where each field of an envelope is, with names the models know under another one."""


@st.composite
def envelopes(draw: st.DrawFn) -> dict[str, Any]:
    """A review in the plain form kube-apiserver sends, then a few fields left out, given
    odd values, or added under their Python names."""
    request = {
        "uid": draw(st.text(min_size=1, max_size=3)),
        "kind": {"group": draw(NAMES), "version": draw(NAMES), "kind": draw(NAMES)},
        "resource": {"group": draw(NAMES), "version": draw(NAMES), "resource": draw(NAMES)},
        "subResource": draw(NAMES),
        "name": draw(st.text(max_size=3)),
        "namespace": draw(st.text(max_size=3)),
        "operation": draw(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"])),
        "object": draw(OBJECTS),
        "oldObject": draw(OBJECTS),
        "dryRun": draw(st.booleans()),
    }
    for name in draw(st.sets(st.sampled_from(sorted(request)), max_size=4)):
        del request[name]  # optional fields left out; required ones make it invalid
    envelope = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    changes = st.tuples(st.sampled_from(sorted(FIELDS)), st.integers(0, 20), ODD_VALUES)
    for where, which, value in draw(st.lists(changes, max_size=3)):
        parent: Any = envelope
        for key in where:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            names = FIELDS[where]
            parent[names[which % len(names)]] = copy.deepcopy(value)
    return envelope


class TestReadRequest:
    """The edge reads a review by hand when its envelope has the plain form, else with the
    models: the same request either way, and the same refusal."""

    @given(envelopes())
    def test_a_review_read_by_hand_is_read_as_the_models_read_it(
        self, envelope: dict[str, Any]
    ) -> None:
        plain = plain_request(envelope)
        try:
            modelled = to_engine_request(parse_review(encoded(envelope)))
        except InvalidReview:
            assert plain is None
            return
        assert plain is None or plain == modelled

    @given(envelopes())
    def test_read_request_gives_what_the_models_give_or_the_same_refusal(
        self, envelope: dict[str, Any]
    ) -> None:
        body = encoded(envelope)
        try:
            expected = to_engine_request(parse_review(body))
        except InvalidReview as refused:
            with pytest.raises(InvalidReview) as raised:
                read_request(body)
            assert str(raised.value) == str(refused)
            return
        assert read_request(body) == expected

    def test_a_review_as_kube_apiserver_sends_it_is_read_by_hand(self, review: Review) -> None:
        sent = review(pod(), uid="u-1", sub_resource="", old_object={"kind": "Pod"})
        sent["request"]["dryRun"] = False

        assert plain_request(sent) == to_engine_request(parse_review(encoded(sent)))

    @pytest.mark.parametrize(
        "change",
        [
            {"dryRun": "true"},
            {"dryRun": 1},
            {"sub_resource": "status"},
            {"uid": ""},
            {"name": None},
            {"kind": {"group": "", "version": "v1"}},
        ],
        ids=["dry-run-a-string", "dry-run-a-number", "python-name", "empty-uid", "null-name", "kind-without-kind"],
    )  # fmt: skip
    def test_an_envelope_the_models_would_convert_or_refuse_is_left_to_them(
        self, review: Review, change: dict[str, Any]
    ) -> None:
        sent = review(pod(), uid="u-1")
        sent["request"].update(change)

        assert plain_request(sent) is None


class TestRequestUid:
    @pytest.mark.parametrize(
        "body",
        [
            encoded({"request": {"uid": "u-9"}}),
            encoded({"apiVersion": "admission.k8s.io/v1beta1", "request": {"uid": "u-9"}}),
            encoded({"request": {"uid": "u-9", "operation": "PATCH"}}),
        ],
        ids=["bare", "v1beta1", "bad-operation"],
    )
    def test_the_uid_of_a_review_that_failed_to_parse_is_recovered(self, body: bytes) -> None:
        with pytest.raises(InvalidReview):
            parse_review(body)
        assert request_uid(body) == "u-9"

    @pytest.mark.parametrize(
        "body",
        [
            b"{not json",
            b"[]",
            b'"u-9"',
            encoded({"request": ["u-9"]}),
            encoded({"request": {}}),
            encoded({"request": {"uid": ""}}),
            encoded({"request": {"uid": 9}}),
            encoded({"request": {"uid": ["u-9"]}}),
            encoded({"uid": "u-9"}),
        ],
        ids=[
            "not-json", "array", "string", "request-a-list", "no-uid", "empty-uid",
            "numeric-uid", "uid-a-list", "uid-outside-request",
        ],
    )  # fmt: skip
    def test_no_uid_is_made_up_when_there_is_no_usable_one(self, body: bytes) -> None:
        assert request_uid(body) is None

    @given(st.binary(max_size=200))
    def test_any_bytes_give_a_uid_or_none_and_never_raise(self, body: bytes) -> None:
        uid = request_uid(body)

        assert uid is None or (isinstance(uid, str) and uid)

    @given(st.text(min_size=1, max_size=40))
    def test_any_non_empty_string_uid_is_returned_as_sent(self, uid: str) -> None:
        assert request_uid(orjson.dumps({"request": {"uid": uid}})) == uid


class TestComplete:
    def test_an_allowed_decision_without_a_patch_is_exactly_uid_and_allowed(self) -> None:
        assert complete("u-1", Decision(allowed=True)) == {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "u-1", "allowed": True},
        }

    def test_a_patch_is_sent_as_base64_json_patch_with_its_type(self) -> None:
        operations = (
            {"op": "add", "path": "/spec/priorityClassName", "value": "inference-priority"},
            {"op": "add", "path": "/spec/priority", "value": 1000000},
        )

        response = complete("u-2", Decision(allowed=True, patch=operations))["response"]

        assert response["patchType"] == "JSONPatch"
        assert json.loads(base64.b64decode(response["patch"], validate=True)) == list(operations)
        assert (response["uid"], response["allowed"]) == ("u-2", True)
        assert "status" not in response

    def test_a_denial_carries_code_reason_and_message(self) -> None:
        decision = Decision(
            allowed=False,
            code=403,
            message="gpu-admission denied pod 'ml/p': no class",
            violations=(Violation("workload-class", "no class"),),
        )

        assert complete("u-3", decision)["response"] == {
            "uid": "u-3",
            "allowed": False,
            "status": {
                "code": 403,
                "message": "gpu-admission denied pod 'ml/p': no class",
                "reason": "Forbidden",
            },
        }

    @pytest.mark.parametrize(
        ("code", "reason"),
        [
            (400, "BadRequest"),
            (403, "Forbidden"),
            (413, "RequestEntityTooLarge"),
            (500, "InternalError"),
            (422, "Forbidden"),
        ],
    )
    def test_the_status_reason_is_the_kubernetes_reason_for_the_code(
        self, code: int, reason: str
    ) -> None:
        response = complete("u", Decision(allowed=False, code=code, message="m"))["response"]

        assert response["status"]["reason"] == reason

    def test_warnings_are_passed_on_as_a_list(self) -> None:
        decision = Decision(allowed=True, warnings=("one", "two"))

        assert complete("u-4", decision)["response"]["warnings"] == ["one", "two"]

    def test_audit_annotations_are_passed_on_as_a_mapping(self) -> None:
        decision = Decision(allowed=True, audit_annotations={"gpu-count": "too many"})

        response = complete("u-6", decision)["response"]

        assert response == {
            "uid": "u-6",
            "allowed": True,
            "auditAnnotations": {"gpu-count": "too many"},
        }

    def test_warnings_and_audit_annotations_of_an_engine_decision_reach_the_json(
        self, review: Review
    ) -> None:
        text = default_policy_text() + (
            "\nenforcement:\n  rules: {gpu-count: warn, priority-class: audit}\n"
        )
        engine = Engine(load_policy_text(text, "modes.yaml"))
        obj = pod(
            "training",
            containers=[container(gpus=9)],
            priorityClassName="inference-priority",
            priority=1000000,
        )
        sent = review(mutated(engine, obj), uid="u-7")

        body = orjson.dumps(
            complete("u-7", engine.validate(to_engine_request(parse_review(encoded(sent)))))
        )
        response = json.loads(body)["response"]

        assert response["allowed"] is True
        assert "status" not in response
        (warning,) = response["warnings"]
        assert warning.startswith("gpu-admission: gpu-count: ") and len(warning) <= 256
        assert list(response["auditAnnotations"]) == ["priority-class"]
        assert "inference-priority" in response["auditAnnotations"]["priority-class"]

    def test_the_response_serialises_to_json(self) -> None:
        decision = Decision(allowed=True, patch=({"op": "add", "path": "/a", "value": 1},))

        assert orjson.loads(orjson.dumps(complete("u-5", decision))) == complete("u-5", decision)

    @given(
        st.text(min_size=1, max_size=40),
        st.lists(
            st.fixed_dictionaries(
                {
                    "op": st.just("add"),
                    "path": st.text(max_size=20),
                    "value": st.integers(-(2**63), 2**64 - 1),
                }
            ),
            min_size=1,
            max_size=5,
        ),
    )
    def test_any_uid_is_echoed_and_any_patch_decodes_back(
        self, uid: str, operations: list[dict[str, Any]]
    ) -> None:
        response = complete(uid, Decision(allowed=True, patch=tuple(operations)))["response"]

        assert response["uid"] == uid
        assert json.loads(base64.b64decode(response["patch"])) == operations


class TestErrored:
    def test_errored_is_a_denial_with_the_given_code_and_message(self) -> None:
        assert errored("u-6", 500, "gpu-admission internal error; see its logs") == {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {
                "uid": "u-6",
                "allowed": False,
                "status": {
                    "code": 500,
                    "message": "gpu-admission internal error; see its logs",
                    "reason": "InternalError",
                },
            },
        }

    def test_a_malformed_object_error_is_a_bad_request(self) -> None:
        status = errored("u-7", 400, "malformed object: spec: must be a mapping")["response"][
            "status"
        ]

        assert (status["code"], status["reason"]) == (400, "BadRequest")


class TestToEngineRequest:
    def test_every_field_the_engine_reads_is_carried_over(self, review: Review) -> None:
        obj = pod("inference")
        sent = review(
            obj,
            operation="UPDATE",
            uid="u-8",
            sub_resource="ephemeralcontainers",
            name="p",
            old_object={"kind": "Pod"},
        )

        request = to_engine_request(parse_review(encoded(sent)))

        assert (request.uid, request.operation) == ("u-8", "UPDATE")
        assert (request.group, request.version, request.kind) == ("", "v1", "Pod")
        assert (request.resource, request.subresource) == ("pods", "ephemeralcontainers")
        assert (request.namespace, request.name) == ("ml", "p")
        assert request.object == obj
        assert request.old_object == {"kind": "Pod"}
        assert request.is_ephemeral_containers_update
        assert not request.is_pod_create

    def test_a_pod_create_is_recognised_as_one(self, review: Review) -> None:
        request = to_engine_request(parse_review(encoded(review(pod()))))

        assert request.is_pod_create

    def test_the_group_is_the_kind_group_so_a_pod_of_another_group_is_not_a_pod(
        self, review: Review
    ) -> None:
        sent = review(pod(), group="example.com", resource="pods")

        request = to_engine_request(parse_review(encoded(sent)))

        assert request.group == "example.com"
        assert not request.is_pod
