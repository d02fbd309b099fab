"""Which namespace a replica runs in (webhook.service.namespace): the downward API's
POD_NAMESPACE, else the service account's namespace file, else gpu-admission."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.service.namespace import NAMESPACE_ENV, service_namespace


def account_file(directory: Path, text: str) -> Path:
    path = directory / "namespace"
    path.write_text(text, "utf-8")
    return path


def test_the_namespace_the_deployment_sets_from_the_downward_api_comes_first(
    tmp_path: Path,
) -> None:
    mounted = account_file(tmp_path, "from-the-account")

    assert service_namespace({NAMESPACE_ENV: "platform-admission"}, mounted) == "platform-admission"


def test_without_it_the_service_accounts_namespace_file_says_where_the_pod_runs(
    tmp_path: Path,
) -> None:
    mounted = account_file(tmp_path, "platform-admission\n")

    assert service_namespace({}, mounted) == "platform-admission"


def test_an_empty_variable_is_passed_over_for_the_file(tmp_path: Path) -> None:
    mounted = account_file(tmp_path, "platform-admission")

    assert service_namespace({NAMESPACE_ENV: " "}, mounted) == "platform-admission"


def test_outside_a_cluster_the_namespace_is_the_one_install_uses(tmp_path: Path) -> None:
    assert service_namespace({}, tmp_path / "absent") == "gpu-admission"
    assert service_namespace({}, account_file(tmp_path, "\n")) == "gpu-admission"
    assert service_namespace({}, tmp_path) == "gpu-admission"  # a directory: unreadable


def test_the_variable_is_read_from_the_process_environment_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(NAMESPACE_ENV, "platform-admission")

    assert service_namespace(account_file=tmp_path / "absent") == "platform-admission"
