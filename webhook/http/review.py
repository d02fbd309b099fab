"""AdmissionReview v1: parsing the envelope and building responses.

The envelope is checked with pydantic; the object inside stays a plain mapping.
Responses are only built through the constructors below, which always echo the
request uid and set `patchType` when there is a patch.

The edge reads each review with ``read_request``: an envelope in the plain form
kube-apiserver sends (every field of the type it must have, in its JSON name) is read
by hand (``plain_request``), in a tenth of the time pydantic takes; anything else
goes through the models below, which accept or refuse it, with their error messages.
The hand reading accepts nothing the models refuse, and reads the same values.

Two error channels (see the HTTP edge): a body that is not an AdmissionReview
at all gets an HTTP 400, so kube-apiserver applies the webhook's failurePolicy;
a readable review whose object is malformed gets `allowed: false` with code 400
and the uid echoed, so the user sees why.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webhook.engine import AdmissionRequest, Decision
from webhook.errors import GpuAdmissionError

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"


class InvalidReview(GpuAdmissionError, ValueError):
    """The body is not an AdmissionReview v1 this service can answer."""


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class GroupVersionKind(_Envelope):
    group: str = ""
    version: str = ""
    kind: str


class GroupVersionResource(_Envelope):
    group: str = ""
    version: str = ""
    resource: str


class ReviewRequest(_Envelope):
    uid: str = Field(min_length=1)
    kind: GroupVersionKind
    resource: GroupVersionResource
    sub_resource: str = Field(default="", alias="subResource")
    name: str = ""
    namespace: str = ""
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    object: Any = None
    old_object: Any = Field(default=None, alias="oldObject")
    dry_run: bool = Field(default=False, alias="dryRun")


class AdmissionReview(_Envelope):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: ReviewRequest


def parse_review(body: bytes | bytearray) -> AdmissionReview:
    return _validated(_json_object(body))


def read_request(body: bytes | bytearray) -> AdmissionRequest:
    """The engine's request in ``body``, which must be an AdmissionReview v1 (else
    InvalidReview, saying why, as ``parse_review`` does)."""
    data = _json_object(body)
    plain = plain_request(data)
    return plain if plain is not None else to_engine_request(_validated(data))


_OPERATIONS = frozenset(("CREATE", "UPDATE", "DELETE", "CONNECT"))
_FIELD_NAMES = frozenset(("api_version", "sub_resource", "old_object", "dry_run"))
"""The models' own names of the fields with a JSON name: they accept either."""


def plain_request(data: dict[str, Any]) -> AdmissionRequest | None:
    """The request of a decoded review whose envelope has the plain form kube-apiserver
    sends, read without the models; None for any other (valid or not), for the models
    to read. Every check is the models' own, made strictly: a field they would convert
    or refuse, or a field under its Python name, is left to them."""
    request = data.get("request")
    if (
        data.get("apiVersion") != API_VERSION
        or data.get("kind") != KIND
        or "api_version" in data
        or type(request) is not dict
        or not _FIELD_NAMES.isdisjoint(request)
    ):
        return None
    uid, operation = request.get("uid"), request.get("operation")
    kind, resource = request.get("kind"), request.get("resource")
    if type(uid) is not str or not uid or type(operation) is not str:
        return None
    if operation not in _OPERATIONS or type(kind) is not dict or type(resource) is not dict:
        return None
    kind_name, resource_name = kind.get("kind"), resource.get("resource")
    if type(kind_name) is not str or type(resource_name) is not str:
        return None
    optional = (
        kind.get("group", ""),
        kind.get("version", ""),
        resource.get("group", ""),
        resource.get("version", ""),
        request.get("subResource", ""),
        request.get("namespace", ""),
        request.get("name", ""),
    )
    dry_run = request.get("dryRun", False)
    if any(type(value) is not str for value in optional) or type(dry_run) is not bool:
        return None
    group, version, _, _, subresource, namespace, name = optional
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        group=group,
        version=version,
        kind=kind_name,
        resource=resource_name,
        subresource=subresource,
        namespace=namespace,
        name=name,
        object=request.get("object"),
        old_object=request.get("oldObject"),
        dry_run=dry_run,
    )


def _json_object(body: bytes | bytearray) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise InvalidReview(f"body is not JSON: {error}") from error
    if not isinstance(data, dict):
        raise InvalidReview("body is not a JSON object")
    return data


def _validated(data: dict[str, Any]) -> AdmissionReview:
    try:
        return AdmissionReview.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in error.errors()
        )
        raise InvalidReview(f"not an AdmissionReview {API_VERSION}: {problems}") from error


def request_uid(body: bytes | bytearray) -> str | None:
    """The uid of a review that failed to parse as a whole, to echo in an error response."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    request = data.get("request") if isinstance(data, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) and uid else None


def to_engine_request(review: AdmissionReview) -> AdmissionRequest:
    request = review.request
    return AdmissionRequest(
        uid=request.uid,
        operation=request.operation,
        group=request.kind.group,
        version=request.kind.version,
        kind=request.kind.kind,
        resource=request.resource.resource,
        subresource=request.sub_resource,
        namespace=request.namespace,
        name=request.name,
        object=request.object,
        old_object=request.old_object,
        dry_run=request.dry_run,
    )


def complete(uid: str, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview answering `uid` with `decision`."""
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {
            "code": decision.code,
            "message": decision.message,
            "reason": _reason(decision.code),
        }
    if decision.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(decision.patch)).decode("ascii")
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    if decision.audit_annotations:
        response["auditAnnotations"] = dict(decision.audit_annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def errored(uid: str, code: int, message: str) -> dict[str, Any]:
    """A denial for a review the service could not judge (malformed object, internal error)."""
    return complete(uid, Decision(allowed=False, code=code, message=message))


def _reason(code: int) -> str:
    reasons = {
        400: "BadRequest",
        403: "Forbidden",
        413: "RequestEntityTooLarge",
        500: "InternalError",
    }
    return reasons.get(code, "Forbidden")
