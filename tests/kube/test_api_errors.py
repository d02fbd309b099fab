"""One line for a failed call to kube-apiserver (webhook/kube/api_errors.py)."""

from __future__ import annotations

import json

from webhook.kube.api_errors import ApiException, api_error_message


def failed(status: int, reason: str, body: str | None) -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = body
    return error


def test_the_message_is_the_status_and_kube_apiservers_own_explanation() -> None:
    body = json.dumps({"kind": "Status", "message": 'namespaces "gpu" is being terminated'})
    assert api_error_message(failed(409, "Conflict", body)) == (
        '409 Conflict: namespaces "gpu" is being terminated'
    )


def test_a_body_that_is_not_a_status_is_given_on_one_line() -> None:
    page = "<html>\n  <body>Bad Gateway</body>\n</html>\n"
    assert api_error_message(failed(502, "Bad Gateway", page)) == (
        "502 Bad Gateway: <html> <body>Bad Gateway</body> </html>"
    )


def test_without_a_body_the_status_says_it_all() -> None:
    assert api_error_message(failed(403, "Forbidden", None)) == "403 Forbidden"
