"""Which credentials a command uses, found as kubectl finds them (webhook/kube/credentials.py).

Every kubeconfig here is a real file in tmp_path; the environment and the home
directory are passed in, so nothing of the machine running the tests is read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.kube.credentials import CredentialsError, resolve_credentials


def kubeconfig(
    path: Path,
    clusters: dict[str, str],
    contexts: dict[str, str],
    current: str | None = None,
    extra_cluster_fields: dict[str, Any] | None = None,
) -> Path:
    """A kubeconfig at ``path``: clusters name -> server, contexts name -> cluster (each
    with a user of that context's name, holding a token of that name)."""
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, **(extra_cluster_fields or {})}}
            for name, server in clusters.items()
        ],
        "contexts": [
            {"name": name, "context": {"cluster": cluster, "user": name}}
            for name, cluster in contexts.items()
        ],
        "users": [{"name": name, "user": {"token": f"token-{name}"}} for name in contexts],
    }
    if current is not None:
        document["current-context"] = current
    path.write_text(yaml.safe_dump(document), "utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home directory with no ~/.kube/config."""
    directory = tmp_path / "home"
    directory.mkdir()
    return directory


def default_kubeconfig(home: Path, server: str = "https://home.example:6443") -> Path:
    (home / ".kube").mkdir()
    return kubeconfig(home / ".kube" / "config", {"home": server}, {"home": "home"}, "home")


def test_kubeconfig_option_wins_over_the_environment_and_the_home_file(
    tmp_path: Path, home: Path
) -> None:
    default_kubeconfig(home)
    listed = kubeconfig(tmp_path / "env", {"e": "https://env.example"}, {"e": "e"}, "e")
    given = kubeconfig(tmp_path / "given", {"g": "https://given.example"}, {"g": "g"}, "g")

    found = resolve_credentials(given, environ={"KUBECONFIG": str(listed)}, home=home)

    assert found.server == "https://given.example"
    assert found.source == f"kubeconfig {given} (context g)"
    assert found.configuration.api_key == {"BearerToken": "Bearer token-g"}


def test_kubeconfig_environment_wins_over_the_home_file(tmp_path: Path, home: Path) -> None:
    default_kubeconfig(home)
    listed = kubeconfig(tmp_path / "env", {"e": "https://env.example"}, {"e": "e"}, "e")

    found = resolve_credentials(environ={"KUBECONFIG": str(listed)}, home=home)

    assert found.server == "https://env.example"


@pytest.mark.parametrize("environ", [{}, {"KUBECONFIG": ""}], ids=["unset", "empty"])
def test_without_option_or_environment_the_home_file_is_used(
    home: Path, environ: dict[str, str]
) -> None:
    config = default_kubeconfig(home)

    found = resolve_credentials(environ=environ, home=home)

    assert found.server == "https://home.example:6443"
    assert found.source == f"kubeconfig {config} (context home)"


def test_a_kubeconfig_list_is_merged_the_first_file_to_set_a_value_winning(
    tmp_path: Path, home: Path
) -> None:
    first = kubeconfig(
        tmp_path / "first", {"shared": "https://first.example"}, {"one": "shared"}, "one"
    )
    second = kubeconfig(
        tmp_path / "second",
        {"shared": "https://second.example", "own": "https://own.example"},
        {"two": "own", "three": "shared"},
        "two",
    )
    environ = {"KUBECONFIG": os.pathsep.join([str(first), str(second)])}

    # current-context: the first file's, as kubectl has it.
    assert resolve_credentials(environ=environ, home=home).server == "https://first.example"
    # A context only the second file has, with its own cluster and user.
    two = resolve_credentials(context="two", environ=environ, home=home)
    assert two.server == "https://own.example"
    assert two.configuration.api_key == {"BearerToken": "Bearer token-two"}
    # A cluster both files name: the first file's.
    assert (
        resolve_credentials(context="three", environ=environ, home=home).server
        == "https://first.example"
    )


def test_files_of_the_list_that_do_not_exist_are_skipped(tmp_path: Path, home: Path) -> None:
    present = kubeconfig(tmp_path / "present", {"c": "https://present.example"}, {"x": "c"}, "x")
    environ = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "absent"), str(present)])}

    assert resolve_credentials(environ=environ, home=home).server == "https://present.example"


def test_relative_certificate_paths_are_read_beside_the_file_naming_them(
    tmp_path: Path, home: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ca.crt").write_text("not checked until used\n", "utf-8")
    first = kubeconfig(tmp_path / "first", {"a": "https://a.example"}, {"a": "a"}, "a")
    second = kubeconfig(
        elsewhere / "second",
        {"b": "https://b.example"},
        {"b": "b"},
        extra_cluster_fields={"certificate-authority": "ca.crt"},
    )
    environ = {"KUBECONFIG": os.pathsep.join([str(first), str(second)])}

    found = resolve_credentials(context="b", environ=environ, home=home)

    assert found.configuration.ssl_ca_cert == str(elsewhere / "ca.crt")


def test_nothing_is_written_back_to_the_files(tmp_path: Path, home: Path) -> None:
    first = kubeconfig(tmp_path / "first", {"a": "https://a.example"}, {"a": "a"}, "a")
    second = kubeconfig(tmp_path / "second", {"b": "https://b.example"}, {"b": "b"}, "b")
    before = [first.read_bytes(), second.read_bytes()]

    resolve_credentials(
        context="b", environ={"KUBECONFIG": f"{first}{os.pathsep}{second}"}, home=home
    )

    assert [first.read_bytes(), second.read_bytes()] == before


def test_a_refused_connection_is_retried_once_and_a_read_never(home: Path) -> None:
    config = default_kubeconfig(home)

    retries = resolve_credentials(config, home=home).configuration.retries

    assert (retries.connect, retries.read) == (1, 0)


# --- one line when nothing can be used -----------------------------------------------------------


def failure(*args: Any, **kwargs: Any) -> str:
    with pytest.raises(CredentialsError) as raised:
        resolve_credentials(*args, **kwargs)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_nothing_found_names_everything_tried(home: Path) -> None:
    assert failure(environ={}, home=home) == (
        f"no cluster credentials: no --kubeconfig, $KUBECONFIG is not set, "
        f"{home / '.kube' / 'config'} does not exist, and not in a pod "
        "(KUBERNETES_SERVICE_HOST is not set); give --kubeconfig FILE"
    )


def test_a_kubeconfig_list_of_absent_files_is_named(tmp_path: Path, home: Path) -> None:
    listed = os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")])

    assert failure(environ={"KUBECONFIG": listed}, home=home).startswith(
        f"no cluster credentials: no file of $KUBECONFIG={listed} exists, and not in a pod"
    )


def test_a_missing_kubeconfig_option_is_named(tmp_path: Path, home: Path) -> None:
    missing = tmp_path / "missing"

    assert failure(missing, environ={}, home=home) == f"kubeconfig {missing}: no such file"


def test_in_a_pod_without_its_token_the_service_account_is_named(home: Path) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    assert failure(environ=environ, home=home).startswith("in-cluster service account: ")


def test_an_unknown_context_lists_the_known_ones(tmp_path: Path, home: Path) -> None:
    first = kubeconfig(tmp_path / "first", {"a": "https://a.example"}, {"a": "a"}, "a")
    second = kubeconfig(tmp_path / "second", {"b": "https://b.example"}, {"b": "b"}, "b")
    environ = {"KUBECONFIG": f"{first}{os.pathsep}{second}"}

    assert failure(context="prod", environ=environ, home=home) == (
        f"kubeconfig {first}, {second}: --context 'prod' not found (contexts: a, b)"
    )


def test_a_current_context_that_is_not_there_is_named(tmp_path: Path, home: Path) -> None:
    config = kubeconfig(tmp_path / "config", {"a": "https://a.example"}, {"a": "a"}, "gone")

    assert failure(config, environ={}, home=home) == (
        f"kubeconfig {config}: current-context 'gone' not found (contexts: a)"
    )


def test_without_a_current_context_the_option_is_asked_for(tmp_path: Path, home: Path) -> None:
    config = kubeconfig(tmp_path / "config", {"a": "https://a.example"}, {"a": "a"})

    assert failure(config, environ={}, home=home) == (
        f"kubeconfig {config}: no current-context; give --context (contexts: a)"
    )


def test_a_context_without_a_kubeconfig_is_refused(home: Path) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    assert failure(context="prod", environ=environ, home=home).startswith(
        "context 'prod': no kubeconfig file found (no --kubeconfig, $KUBECONFIG is not set"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("clusters: [unclosed\n", "not YAML: "),
        ("just a string\n", "not a kubeconfig (no clusters, no contexts)"),
        ("", "not a kubeconfig (no clusters, no contexts)"),
        ("clusters: {a: b}\n", "clusters is not a list of named entries"),
        ("contexts: [{context: {}}]\n", "contexts is not a list of named entries"),
    ],
    ids=["not-yaml", "a-string", "empty", "clusters-a-mapping", "context-without-name"],
)
def test_a_file_that_is_not_a_kubeconfig_is_named_with_why(
    tmp_path: Path, home: Path, text: str, reason: str
) -> None:
    bad = tmp_path / "bad"
    bad.write_text(text, "utf-8")

    assert failure(bad, environ={}, home=home).startswith(f"kubeconfig {bad}: {reason}")


def test_a_context_whose_cluster_is_not_there_is_named(tmp_path: Path, home: Path) -> None:
    config = kubeconfig(tmp_path / "config", {"a": "https://a.example"}, {"x": "missing"}, "x")

    message = failure(config, environ={}, home=home)

    assert message.startswith(f"kubeconfig {config}, context 'x': ")
    assert "missing" in message
