"""Credentials as kubectl finds them, and a cluster that says no, against the real kube-apiserver.

`install`, `uninstall` and `certs rotate` run as the installed command does, in a
process whose home directory has no kubeconfig. Proven here: install through
`$KUBECONFIG` (a list of two files, the context picked with `--context`); a server
dry run that leaves nothing behind, before and after an install; a user RBAC grants
nothing, refused in one line naming the verb, the resource and where; credentials
the server does not accept (401); and a server that is not there. Every failure is
one line on stderr, exit code 1, no traceback.

Without a kubelet the Deployment never becomes available, so install runs with
`--wait 0` (tests/e2e/test_install.py proves what it stores).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.install.names import NAMESPACE

from .controlplane import ControlPlane
from .kubeconfig import write_token_kubeconfig
from .test_install import wait_until_gone
from .webhook_server import WebhookServer

ADMIN_CONTEXT = "e2e-admin"
SERVER_DRY_RUN = "(server dry run)"


def gpu_admission(
    home: Path, *args: str, kubeconfig_list: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own: HOME without a kubeconfig, no in-cluster
    variables, and ``$KUBECONFIG`` only when given."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in {"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    }
    environ["HOME"] = str(home)
    if kubeconfig_list is not None:
        environ["KUBECONFIG"] = kubeconfig_list
    return subprocess.run(
        [sys.executable, "-m", "webhook.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )


def one_line(result: subprocess.CompletedProcess[str], command: str) -> str:
    """The single line a failed command printed, checked to be the only output."""
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    prefix = f"gpu-admission {command}: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0].removeprefix(prefix)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kubeconfig_with_token(controlplane: ControlPlane, token: str, path: Path) -> Path:
    return write_token_kubeconfig(
        path, server=controlplane.api_url, ca_cert=controlplane.ca_path, token=token, user="holder"
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home directory with no ~/.kube/config."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def kubeconfig_list(controlplane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``$KUBECONFIG`` of two files: the first's current-context is a server that is
    not there; the second holds the admin's credentials under ``ADMIN_CONTEXT``."""
    directory = tmp_path_factory.mktemp("kubeconfigs")
    decoy = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "decoy", "cluster": {"server": f"https://127.0.0.1:{closed_port()}"}}
        ],
        "users": [{"name": "decoy", "user": {"token": "decoy"}}],
        "contexts": [{"name": "decoy", "context": {"cluster": "decoy", "user": "decoy"}}],
        "current-context": "decoy",
    }
    admin: dict[str, Any] = yaml.safe_load(controlplane.kubeconfig.read_text("utf-8"))
    for context in admin["contexts"]:
        context["name"] = ADMIN_CONTEXT
    admin["current-context"] = ADMIN_CONTEXT
    first, second = directory / "decoy.kubeconfig", directory / "admin.kubeconfig"
    first.write_text(yaml.safe_dump(decoy), "utf-8")
    second.write_text(yaml.safe_dump(admin), "utf-8")
    return os.pathsep.join([str(first), str(second)])


@pytest.fixture(scope="module")
def nobody(controlplane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A kubeconfig of a ServiceAccount no RBAC rule grants anything, with a token the
    apiserver issued for it."""
    namespace = controlplane.create_namespace("e2e-credentials")
    controlplane.kubectl("create", "serviceaccount", "nobody", "--namespace", namespace)
    token = controlplane.kubectl(
        "create", "token", "nobody", "--namespace", namespace, "--duration=10m"
    ).stdout.strip()
    try:
        yield kubeconfig_with_token(
            controlplane, token, tmp_path_factory.mktemp("nobody") / "kubeconfig"
        )
    finally:
        controlplane.delete_namespace(namespace, wait=False)


def webhook_versions(controlplane: ControlPlane) -> list[str]:
    return [
        controlplane.get_json(kind, "gpu-admission")["metadata"]["resourceVersion"]
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration")
    ]


# --- failures, each in one line ------------------------------------------------------------------


def test_an_unreachable_server_is_one_line_naming_it(home: Path, kubeconfig_list: str) -> None:
    # Without --context, the first file's current-context: the decoy, nothing listening.
    decoy = yaml.safe_load(Path(kubeconfig_list.split(os.pathsep)[0]).read_text("utf-8"))
    server = decoy["clusters"][0]["cluster"]["server"]

    result = gpu_admission(home, "install", "--wait", "0", kubeconfig_list=kubeconfig_list)

    assert one_line(result, "install") == (
        f"cannot reach the API server at {server}: connection refused"
    )


def test_credentials_the_server_does_not_accept_are_one_line(
    controlplane: ControlPlane, home: Path, tmp_path: Path
) -> None:
    forged = kubeconfig_with_token(controlplane, "not-a-token", tmp_path / "forged")

    result = gpu_admission(home, "uninstall", "--kubeconfig", str(forged))

    assert one_line(result, "uninstall") == (
        f"unauthorized (401): the API server at {controlplane.api_url} does not accept these "
        "credentials (an expired token or certificate, or a user it does not know)"
    )


def test_a_user_rbac_grants_nothing_is_told_the_verb_resource_and_where(
    controlplane: ControlPlane, home: Path, nobody: Path
) -> None:
    user = "system:serviceaccount:e2e-credentials:nobody"

    install = gpu_admission(home, "install", "--wait", "0", "--kubeconfig", str(nobody))
    rotate = gpu_admission(
        home, "certs", "rotate", "--kubeconfig", str(nobody),
        "--namespace", "e2e-credentials", "--secret", "gpu-admission-tls",
    )  # fmt: skip

    assert one_line(install, "install") == (
        f"forbidden (403): user {user} may not patch namespace gpu-admission "
        f"on the API server at {controlplane.api_url}"
    )
    assert one_line(rotate, "certs rotate") == (
        f"forbidden (403): user {user} may not get secrets in namespace e2e-credentials "
        f"on the API server at {controlplane.api_url}"
    )
    assert not controlplane.exists("namespace", NAMESPACE)


# --- dry runs and an install through $KUBECONFIG --------------------------------------------------


def test_a_server_dry_run_before_an_install_leaves_nothing_behind(
    controlplane: ControlPlane, admission: WebhookServer, home: Path, kubeconfig_list: str
) -> None:
    wait_until_gone(controlplane)
    webhooks = webhook_versions(controlplane)  # the test service's, by URL

    result = gpu_admission(
        home, "install", "--dry-run=server", "--context", ADMIN_CONTEXT,
        kubeconfig_list=kubeconfig_list,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("certificates: Secrets gpu-admission/gpu-admission-tls-ca")
    assert f"Namespace/gpu-admission created {SERVER_DRY_RUN}" in lines
    assert f"ClusterRole/gpu-admission created {SERVER_DRY_RUN}" in lines
    assert (
        f"Deployment/gpu-admission created {SERVER_DRY_RUN}: not sent, "
        "the namespace gpu-admission does not exist yet"
    ) in lines
    assert lines[-1] == f"the webhook configurations gpu-admission replaced {SERVER_DRY_RUN}"
    assert not controlplane.exists("namespace", NAMESPACE)
    assert not controlplane.exists("clusterrole", "gpu-admission")
    assert webhook_versions(controlplane) == webhooks


@pytest.fixture(scope="module")
def installed(
    controlplane: ControlPlane, admission: WebhookServer, home: Path, kubeconfig_list: str
) -> Iterator[subprocess.CompletedProcess[str]]:
    """Installed through ``$KUBECONFIG`` with ``--context``, uninstalled the same way."""
    wait_until_gone(controlplane)
    result = gpu_admission(
        home, "install", "--wait", "0", "--context", ADMIN_CONTEXT,
        kubeconfig_list=kubeconfig_list,
    )  # fmt: skip
    try:
        yield result
    finally:
        removed = gpu_admission(
            home, "uninstall", "--keep-priority-classes", "--context", ADMIN_CONTEXT,
            kubeconfig_list=kubeconfig_list,
        )  # fmt: skip
        assert removed.returncode == 0, removed.stderr
        wait_until_gone(controlplane)
        # The session's other tests use configurations pointing at the test's webhook.
        admission.register(controlplane.kubeconfig)


def test_install_reads_a_kubeconfig_list_and_its_context(
    controlplane: ControlPlane, installed: subprocess.CompletedProcess[str]
) -> None:
    assert installed.returncode == 0, installed.stderr
    assert "applied Deployment/gpu-admission" in installed.stdout.splitlines()
    hook = controlplane.get_json("mutatingwebhookconfiguration", "gpu-admission")["webhooks"][0]
    assert hook["clientConfig"]["service"]["namespace"] == NAMESPACE
    assert hook["clientConfig"]["caBundle"]


def test_a_server_dry_run_over_an_install_says_what_would_change_and_changes_nothing(
    controlplane: ControlPlane,
    installed: subprocess.CompletedProcess[str],
    home: Path,
    kubeconfig_list: str,
) -> None:
    before = controlplane.get_json("deployment", "gpu-admission", NAMESPACE)
    webhooks = webhook_versions(controlplane)

    result = gpu_admission(
        home, "install", "--dry-run=server", "--image", "reg/gpu-admission:9.9.9",
        "--context", ADMIN_CONTEXT, kubeconfig_list=kubeconfig_list,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("certificates: the CA of Secret gpu-admission/")
    assert f"Deployment/gpu-admission configured {SERVER_DRY_RUN}" in lines
    assert f"ConfigMap/gpu-admission-policy unchanged {SERVER_DRY_RUN}" in lines
    assert f"Namespace/gpu-admission unchanged {SERVER_DRY_RUN}" in lines
    after = controlplane.get_json("deployment", "gpu-admission", NAMESPACE)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] != "reg/gpu-admission:9.9.9"
    assert webhook_versions(controlplane) == webhooks
