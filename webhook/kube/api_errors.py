"""What a failed call to kube-apiserver means: the status codes acted on, and one line for people.

Every module of the wing compares ``ApiException.status`` with the codes named here,
and every message about a failed call, in a log, a status or a command's error
output, is ``api_error_message``: the status, its reason and kube-apiserver's own
explanation (``namespace ... is being terminated``, ``secrets ... is forbidden``) on
one line.
"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

__all__ = ["CONFLICT", "GONE", "NOT_FOUND", "ApiException", "api_error_message"]

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
