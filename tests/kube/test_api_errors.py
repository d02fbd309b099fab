"""One line for a failed call to kube-apiserver (webhook/kube/api_errors.py).

Answers are built as kube-apiserver words them (its RBAC refusals are also proven
against the real one in tests/e2e/test_credentials.py); an unreachable server is a
real connection to a local port nothing listens on.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from webhook.kube.api_errors import (
    CLUSTER_ERRORS,
    ApiException,
    api_error_message,
    cluster_error_message,
)
from webhook.kube.client import api_client, check_reachable


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


# --- cluster_error_message: what a command prints when the cluster fails it ---------------------

SERVER = "https://127.0.0.1:6443"


def status(code: int, reason: str, message: str) -> ApiException:
    body = {"kind": "Status", "status": "Failure", "message": message, "code": code}
    return failed(code, reason, json.dumps(body))


def test_refused_credentials_name_the_server() -> None:
    error = status(401, "Unauthorized", "Unauthorized")

    assert cluster_error_message(error, SERVER) == (
        "unauthorized (401): the API server at https://127.0.0.1:6443 does not accept these "
        "credentials (an expired token or certificate, or a user it does not know)"
    )


@pytest.mark.parametrize(
    ("message", "said"),
    [
        (
            'secrets "gpu-admission-tls" is forbidden: User "alice" cannot get resource '
            '"secrets" in API group "" in the namespace "gpu-admission"',
            "user alice may not get secrets in namespace gpu-admission",
        ),
        (
            "mutatingwebhookconfigurations.admissionregistration.k8s.io is forbidden: "
            'User "system:serviceaccount:ci:deployer" cannot create resource '
            '"mutatingwebhookconfigurations" in API group "admissionregistration.k8s.io" '
            "at the cluster scope",
            "user system:serviceaccount:ci:deployer may not create "
            "mutatingwebhookconfigurations.admissionregistration.k8s.io at the cluster scope",
        ),
        (
            'deployments.apps "gpu-admission" is forbidden: User "bob" cannot patch resource '
            '"deployments" in API group "apps" in the namespace "gpu-admission": '
            'RBAC: role.rbac.authorization.k8s.io "gone" not found',
            "user bob may not patch deployments.apps in namespace gpu-admission",
        ),
        (
            'namespaces "gpu-admission" is forbidden: User "bob" cannot patch resource '
            '"namespaces" in API group "" in the namespace "gpu-admission"',
            "user bob may not patch namespace gpu-admission",
        ),
    ],
    ids=["namespaced", "cluster-scoped", "with-a-reason-after", "a-namespace"],
)
def test_a_forbidden_action_names_who_verb_resource_and_where(message: str, said: str) -> None:
    error = status(403, "Forbidden", message)

    assert cluster_error_message(error, SERVER) == (
        f"forbidden (403): {said} on the API server at {SERVER}"
    )


def test_a_forbidden_answer_not_from_rbac_is_given_as_it_is() -> None:
    error = status(403, "Forbidden", "denied by the corporate proxy")

    assert cluster_error_message(error, SERVER) == (
        f"forbidden (403) by the API server at {SERVER}: 403 Forbidden: "
        "denied by the corporate proxy"
    )


def test_any_other_refusal_is_the_status_and_kube_apiservers_explanation() -> None:
    error = status(422, "Unprocessable Entity", 'Deployment.apps "x" is invalid')

    assert cluster_error_message(error, SERVER) == (
        f"the API server at {SERVER} refused: 422 Unprocessable Entity: "
        'Deployment.apps "x" is invalid'
    )


def closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unreachable_server_is_named_with_the_reason_in_a_second(tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    config = tmp_path / "config"
    config.write_text(
        f"clusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "current-context: x\n",
        "utf-8",
    )
    api = api_client(config)
    started = time.monotonic()

    with pytest.raises(CLUSTER_ERRORS) as raised:
        check_reachable(api)

    assert time.monotonic() - started < 2
    assert cluster_error_message(raised.value, server) == (
        f"cannot reach the API server at {server}: connection refused"
    )
    api.close()
