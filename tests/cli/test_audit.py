"""`gpu-admission audit` (webhook.cli.audit): which namespaces it judges. The cluster is
a stand-in answering plain Namespaces (tests/service/cluster_stub.py); the audit of what
they hold runs against a real cluster in tests/e2e/test_audit.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.service.cluster_stub import cluster_stub
from webhook.cli.main import main

OPTED_IN = {"gpu-admission.io/enabled": "true"}
NAMESPACES = {
    "kube-system": OPTED_IN,
    "platform-admission": OPTED_IN,
    "gpu-admission": OPTED_IN,
    "team-b": {},
}


def audited(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    with cluster_stub(NAMESPACES) as cluster:
        code = main(["audit", "--kubeconfig", str(cluster.kubeconfig(tmp_path)), "-o", "json", *args])  # fmt: skip

    assert code == 0, capsys.readouterr().err
    namespaces: list[str] = json.loads(capsys.readouterr().out)["scope"]["namespaces"]
    return namespaces


def test_the_service_namespace_given_is_never_audited_and_gpu_admission_then_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A chart installed into platform-admission; gpu-admission is a tenant's."""
    given = ("--service-namespace", "platform-admission")

    assert audited(tmp_path, capsys, *given) == ["gpu-admission"]
    assert audited(tmp_path, capsys, *given, "--all-namespaces") == ["gpu-admission", "team-b"]


def test_by_default_the_service_is_taken_to_run_in_gpu_admission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audited(tmp_path, capsys) == ["platform-admission"]


def test_namespace_narrows_the_audit_to_those_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    given = ("--service-namespace", "platform-admission", "--all-namespaces")

    assert audited(tmp_path, capsys, *given, "-n", "team-b") == ["team-b"]
    assert audited(tmp_path, capsys, *given, "--namespace", "team-b", "-n", "gpu-admission") == [
        "gpu-admission",
        "team-b",
    ]


def test_a_named_namespace_out_of_scope_is_reported_with_the_reason_and_not_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with cluster_stub(NAMESPACES) as cluster:
        kubeconfig = str(cluster.kubeconfig(tmp_path))
        code = main(["audit", "--kubeconfig", kubeconfig, "-o", "json", "-n", "platform-admission", "-n", "team-b"])  # fmt: skip

    out, err = capsys.readouterr()
    assert code == 0, err
    scope = json.loads(out)["scope"]
    reason = (
        "not opted in (no label gpu-admission.io/enabled=true); "
        "--all-namespaces audits it as a preview"
    )
    assert scope["namespaces"] == ["platform-admission"]
    assert scope["named"] == ["platform-admission", "team-b"]
    assert scope["notAudited"] == {"team-b": reason}
    assert err == f"gpu-admission audit: namespace 'team-b' not audited: {reason}\n"


def test_when_no_named_namespace_can_be_audited_the_audit_fails_saying_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with cluster_stub(NAMESPACES) as cluster:
        code = main(["audit", "--kubeconfig", str(cluster.kubeconfig(tmp_path)), "-n", "kube-system"])  # fmt: skip

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        "gpu-admission audit: namespace 'kube-system' not audited: the webhooks never cover it\n"
        "gpu-admission audit: none of the namespaces named (-n) can be audited\n"
    )
