"""`gpu-admission install --dry-run=client` and the help of install and uninstall
(webhook/cli/install.py). Runs against a cluster are end-to-end tests
(tests/e2e/test_install.py, tests/e2e/test_credentials.py)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cli.install import add_install_commands
from webhook.errors import PolicyError
from webhook.policy.load import default_policy_text


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="gpu-admission")
    add_install_commands(root.add_subparsers())
    return root


def client_dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """In a process with no credentials at all: a client dry run needs none."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if key not in {"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}
    }
    environ["HOME"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "webhook.cli", "install", "--dry-run=client", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def test_a_client_dry_run_prints_every_object_as_yaml_without_a_cluster(tmp_path: Path) -> None:
    result = client_dry_run(tmp_path, "--image", "reg/gpu-admission:0.1.0")

    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    kinds = [d["kind"] for d in documents]
    assert kinds[0] == "Namespace"
    assert kinds[-2:] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    assert {"ConfigMap", "Deployment", "Service", "PriorityClass", "CronJob"} <= set(kinds)
    assert "Secret" not in kinds  # certificates are made in the cluster, at install
    images = {
        container["image"]
        for d in documents
        if d["kind"] in {"Deployment", "CronJob"}
        for container in (
            d["spec"]["template"]["spec"]["containers"]
            if d["kind"] == "Deployment"
            else d["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
        )
    }
    assert images == {"reg/gpu-admission:0.1.0"}
    bundles = {
        hook["clientConfig"].get("caBundle") for d in documents[-2:] for hook in d["webhooks"]
    }
    assert bundles == {""}
    assert result.stderr.startswith("gpu-admission install: client dry run, nothing sent.")
    assert "caBundles are empty here: install fills them" in result.stderr


def test_a_client_dry_run_with_a_broken_policy_exits_2_naming_the_file(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools: [\n", "utf-8")

    result = client_dry_run(tmp_path, "--policy", str(policy))

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"gpu-admission install: {policy}")


@pytest.mark.parametrize("value", ["client", "server", "none"])
def test_dry_run_takes_kubectls_values(value: str) -> None:
    assert parser().parse_args(["install", f"--dry-run={value}"]).dry_run == value


def test_dry_run_refuses_other_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["install", "--dry-run=true"])

    assert "invalid choice: 'true'" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["install", "uninstall"])
def test_help_says_where_credentials_come_from(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args([command, "--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert "--kubeconfig FILE" in text
    assert "--context NAME" in text
    assert "else $KUBECONFIG" in text
    assert "else ~/.kube/config, else the in-cluster service account" in text


def test_a_client_dry_run_refuses_a_policy_the_service_would_refuse(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    text = default_policy_text() + "\nenforcement:\n  rules: {gpu-cout: warn}\n"
    policy.write_text(text, "utf-8")

    result = client_dry_run(tmp_path, "--policy", str(policy))

    assert result.returncode == 2
    assert result.stdout == ""
    line = next(n for n, row in enumerate(text.splitlines(), start=1) if "gpu-cout" in row)
    assert f"{policy}:{line}: enforcement.rules.gpu-cout: unknown rule 'gpu-cout'" in result.stderr


def test_audit_refuses_an_installed_policy_the_service_would_refuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from webhook.cli import audit

    text = default_policy_text() + "\nenforcement:\n  rules: {gpu-cout: warn}\n"
    monkeypatch.setattr(audit, "installed_policy", lambda *_: ("installed/policy.yaml", text))
    args = argparse.Namespace(
        policy_from_cluster=True,
        policy=None,
        service_namespace="gpu-admission",
        install_name="gpu-admission",
    )

    with pytest.raises(PolicyError, match="unknown rule 'gpu-cout'"):
        audit._engine(object(), args)


@pytest.mark.parametrize(
    ("options", "where"),
    [
        # A chart installed into a namespace of the platform team's choosing.
        (["--service-namespace", "platform-admission"], ("platform-admission", "gpu-admission")),
        # A chart installed with fullnameOverride names its Deployment by it.
        (["-n", "team-a", "--install-name", "acme-gpu"], ("gpu-admission", "acme-gpu")),
    ],
    ids=["another-namespace", "another-name"],
)
def test_audit_reads_the_installed_policy_of_the_deployment_where_it_is_installed(
    monkeypatch: pytest.MonkeyPatch, options: list[str], where: tuple[str, str]
) -> None:
    from webhook.cli import audit

    asked: list[tuple[str, str]] = []

    def installed(api: object, namespace: str, deployment: str) -> tuple[str, str]:
        asked.append((namespace, deployment))
        return "installed/policy.yaml", default_policy_text()

    monkeypatch.setattr(audit, "installed_policy", installed)
    parser = argparse.ArgumentParser()
    audit.add_audit_commands(parser.add_subparsers())
    args = parser.parse_args(["audit", "--policy-from-cluster", *options])

    audit._engine(object(), args)

    assert asked == [where]
