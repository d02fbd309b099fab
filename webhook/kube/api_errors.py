"""What a failed call to kube-apiserver means: the status codes acted on, and one line for people.

Every module of the wing compares ``ApiException.status`` with the codes named here,
and every message about a failed call, in a log, a status or a command's error
output, is ``api_error_message``: the status, its reason and kube-apiserver's own
explanation (``namespace ... is being terminated``, ``secrets ... is forbidden``) on
one line.

A command that talks to a cluster catches ``CLUSTER_ERRORS`` around its calls and
prints ``cluster_error_message``: a server that cannot be reached (named by its
URL, with the reason: refused, no answer, TLS), credentials refused (401), or an
action RBAC forbids (403: who, which verb, which resource, where), each on one line.
"""

from __future__ import annotations

import json
import re

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException

__all__ = [
    "CLUSTER_ERRORS",
    "CONFLICT",
    "FORBIDDEN",
    "GONE",
    "NOT_FOUND",
    "UNAUTHORIZED",
    "ApiException",
    "api_error_message",
    "cluster_error_message",
]

CLUSTER_ERRORS: tuple[type[Exception], ...] = (ApiException, urllib3.exceptions.HTTPError)
"""What a call to kube-apiserver raises when it fails: an answer with an error status,
or no answer at all (urllib3's errors: refused, timed out, TLS, connection cut)."""

UNAUTHORIZED = 401
FORBIDDEN = 403
NOT_FOUND = 404
CONFLICT = 409
"""A replace whose resourceVersion is no longer current, or a create of an object that exists."""
GONE = 410
"""A watch from a resourceVersion kube-apiserver no longer keeps."""


def api_error_message(error: ApiException) -> str:
    """``<status> <reason>: <kube-apiserver's message>``, on one line.

    The message is the ``message`` of the Status object kube-apiserver answers with;
    a body that is not one (a proxy's error page, say) is given as it is, its lines
    joined.
    """
    try:
        body = json.loads(error.body or "{}")
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    detail = " ".join(str(message or error.body or "").split())
    headline = f"{error.status} {error.reason}"
    return f"{headline}: {detail}" if detail else headline


_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)"'
    r'(?: in API group "(?P<group>[^"]*)")?'
    r'(?: in the namespace "(?P<namespace>[^"]*)")?'
)


def cluster_error_message(error: BaseException, server: str) -> str:
    """One line for a failed call to the API server at ``server`` (its URL)."""
    if isinstance(error, ApiException):
        return _answered(error, server)
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        error = error.reason
    return _unanswered(error, server)


def _answered(error: ApiException, server: str) -> str:
    if error.status == UNAUTHORIZED:
        return (
            f"unauthorized (401): the API server at {server} does not accept these "
            "credentials (an expired token or certificate, or a user it does not know)"
        )
    if error.status == FORBIDDEN:
        return _forbidden(error, server)
    return f"the API server at {server} refused: {api_error_message(error)}"


def _forbidden(error: ApiException, server: str) -> str:
    """kube-apiserver's RBAC refusal, ``User "u" cannot create resource "secrets" in API
    group "" in the namespace "ns"``, said as who may not do what where."""
    detail = api_error_message(error)
    found = _FORBIDDEN.search(detail)
    if found is None:
        return f"forbidden (403) by the API server at {server}: {detail}"
    resource, namespace = found["resource"], found["namespace"]
    if found["group"]:
        resource = f"{resource}.{found['group']}"
    if resource == "namespaces" and namespace:
        # kube-apiserver puts a Namespace in itself: "namespaces in the namespace x".
        what = f"namespace {namespace}"
    elif namespace:
        what = f"{resource} in namespace {namespace}"
    else:
        what = f"{resource} at the cluster scope"
    return (
        f"forbidden (403): user {found['user']} may not {found['verb']} {what} "
        f"on the API server at {server}"
    )


def _unanswered(error: BaseException, server: str) -> str:
    errors = urllib3.exceptions
    if isinstance(error, errors.NameResolutionError):
        why = "its host name does not resolve"
    elif isinstance(error, errors.NewConnectionError):  # a ConnectTimeoutError too
        cause = error.__cause__
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else None
        why = (reason or _one_line(error)).lower()
    elif isinstance(error, errors.ConnectTimeoutError):
        why = "no answer to the connection (timed out)"
    elif isinstance(error, errors.SSLError):
        why = f"TLS failed: {_one_line(error)}"
    elif isinstance(error, errors.ReadTimeoutError):
        return f"the API server at {server} did not answer in time"
    elif isinstance(error, errors.ProtocolError):
        return f"the API server at {server} cut the connection: {_one_line(error)}"
    else:
        why = _one_line(error)
    return f"cannot reach the API server at {server}: {why}"


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
