"""`--kubeconfig` and `--context` of the commands that talk to a cluster
(webhook/cli/cluster_options.py), and their failures as one line with exit code 1.

The commands run as the installed `gpu-admission` does, in a process of their own with
a home directory and an environment of the test's: a traceback would show on stderr.
Kubeconfig files are real files in tmp_path; the unreachable server is a local port
nothing listens on. Refusals by a real kube-apiserver (401, 403) are proven in
tests/e2e/test_credentials.py.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from webhook.cli.cluster_options import add_cluster_options

COMMANDS = [
    ["install", "--image", "reg/gpu-admission:0.1.0"],
    ["uninstall"],
    ["certs", "rotate", "--namespace", "gpu-admission", "--secret", "gpu-admission-tls"],
]
COMMAND_IDS = ["install", "uninstall", "certs-rotate"]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kubeconfig(path: Path, contexts: dict[str, str], current: str | None) -> Path:
    """A kubeconfig whose contexts (name -> server) each have their own cluster."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s}} for n, s in contexts.items()],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in contexts],
    }
    if current is not None:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document), "utf-8")
    return path


def gpu_admission(
    tmp_path: Path, *args: str, kubeconfig_list: str | None = None
) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
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
        timeout=60,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], command: str, line: str) -> None:
    assert (result.returncode, result.stderr) == (1, f"gpu-admission {command}: {line}\n")


@pytest.mark.parametrize("args", COMMANDS, ids=COMMAND_IDS)
def test_without_any_credentials_each_command_says_what_it_tried(
    tmp_path: Path, args: list[str]
) -> None:
    result = gpu_admission(tmp_path, *args)

    command = " ".join(a for a in args[:2] if not a.startswith("-"))
    assert_one_line(
        result,
        command,
        "no cluster credentials: no --kubeconfig, $KUBECONFIG is not set, "
        f"{tmp_path / 'home' / '.kube' / 'config'} does not exist, and not in a pod "
        "(KUBERNETES_SERVICE_HOST is not set); give --kubeconfig FILE",
    )


@pytest.mark.parametrize("args", COMMANDS, ids=COMMAND_IDS)
def test_an_unreachable_server_is_one_line_naming_it_and_fails_fast(
    tmp_path: Path, args: list[str]
) -> None:
    server = f"https://127.0.0.1:{closed_port()}"
    config = kubeconfig(tmp_path / "config", {"down": server}, "down")
    started = time.monotonic()

    result = gpu_admission(tmp_path, *args, "--kubeconfig", str(config))

    command = " ".join(a for a in args[:2] if not a.startswith("-"))
    assert_one_line(result, command, f"cannot reach the API server at {server}: connection refused")
    assert time.monotonic() - started < 15  # the interpreter's start-up included


def test_the_context_picks_a_server_from_a_kubeconfig_list(tmp_path: Path) -> None:
    first_server = f"https://127.0.0.1:{closed_port()}"
    second_server = f"https://127.0.0.2:{closed_port()}"
    first = kubeconfig(tmp_path / "first", {"first": first_server}, "first")
    second = kubeconfig(tmp_path / "second", {"second": second_server}, "second")
    listed = os.pathsep.join([str(first), str(second)])

    default = gpu_admission(tmp_path, "uninstall", kubeconfig_list=listed)
    chosen = gpu_admission(tmp_path, "uninstall", "--context", "second", kubeconfig_list=listed)

    assert first_server in default.stderr
    assert second_server in chosen.stderr


def test_an_unknown_context_lists_the_known_ones(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "config", {"a": "https://a.example", "b": "https://b"}, "a")

    result = gpu_admission(tmp_path, "uninstall", "--kubeconfig", str(config), "--context", "c")

    assert_one_line(
        result, "uninstall", f"kubeconfig {config}: --context 'c' not found (contexts: a, b)"
    )


def test_a_file_that_is_not_a_kubeconfig_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed\n", "utf-8")

    result = gpu_admission(tmp_path, "install", "--kubeconfig", str(bad))

    assert result.returncode == 1
    assert result.stderr.startswith(f"gpu-admission install: kubeconfig {bad}: not YAML: ")
    assert result.stderr.count("\n") == 1


def test_the_options_are_added_with_their_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_cluster_options(parser)

    assert vars(parser.parse_args([])) == {"kubeconfig": None, "context": None}
    assert vars(parser.parse_args(["--kubeconfig", "k", "--context", "c"])) == {
        "kubeconfig": Path("k"),
        "context": "c",
    }
