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
