"""The `gpu-admission` command (webhook/cli/main.py), called through `main(argv)`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import webhook.service.serve
from webhook.cli.main import main
from webhook.policy import Policy
from webhook.policy.load import default_policy_text
from webhook.service.serve import ServeSettings

REPOSITORY = Path(__file__).resolve().parents[2]


UNKNOWN_RULE = "\nenforcement:\n  rules: {gpu-cout: warn}\n"
"""A rule name with a typo, which the engine refuses."""


def broken_default(tmp_path: Path, old: str, new: str, name: str = "broken.yaml") -> Path:
    """The default policy with the first `old` replaced by `new`, written to a file."""
    text = default_policy_text()
    assert old in text, old
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1), "utf-8")
    return path


def line_of(path: Path, fragment: str) -> int:
    """The 1-based number of the line of `path` that contains `fragment`."""
    lines = path.read_text("utf-8").splitlines()
    [number] = [n for n, line in enumerate(lines, start=1) if fragment in line]
    return number


class TestUsage:
    @pytest.mark.parametrize("argv", [[], ["policy"]], ids=["no-command", "policy-alone"])
    def test_a_missing_command_prints_help_and_exits_2(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        code = main(argv)

        assert code == 2
        assert "usage: gpu-admission" in capsys.readouterr().out


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Policy, ServeSettings]]]:
    """Calls `serve` would have received, instead of serving; logging restored afterwards."""
    calls: list[tuple[Policy, ServeSettings]] = []
    monkeypatch.setattr(webhook.service.serve, "serve", lambda p, s: calls.append((p, s)))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield calls
    root.handlers[:] = handlers
    root.setLevel(level)


class TestServe:
    def test_serve_passes_its_options_and_the_embedded_policy_on(
        self, served: list[tuple[Policy, ServeSettings]], tmp_path: Path
    ) -> None:
        cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"

        code = main(
            [
                "serve",
                "--host", "0.0.0.0",
                "--port", "9443",
                "--tls-cert", str(cert),
                "--tls-key", str(key),
                "--log-level", "debug",
            ]
        )  # fmt: skip

        assert code == 0
        [(policy, settings)] = served
        assert policy.source == "policies/default.yaml (embedded)"
        assert settings == ServeSettings(
            host="0.0.0.0", port=9443, tls_cert=cert, tls_key=key, log_level="debug"
        )

    def test_serve_reads_the_policy_file_it_is_given_and_names_it_to_be_watched(
        self, served: list[tuple[Policy, ServeSettings]]
    ) -> None:
        path = REPOSITORY / "policies" / "overflow.yaml"

        assert main(["serve", "--policy", str(path)]) == 0

        [(policy, settings)] = served
        assert policy.source == str(path)
        assert policy.classes["inference"].pools == ("inference", "training")
        assert settings.policy_file == path
        assert settings.reload_interval == 5.0

    def test_serve_takes_the_reload_interval_in_seconds(
        self, served: list[tuple[Policy, ServeSettings]]
    ) -> None:
        assert main(["serve", "--reload-interval", "0.5"]) == 0

        [(_, settings)] = served
        assert settings.reload_interval == 0.5

    @pytest.mark.parametrize("interval", ["0", "-1", "soon"])
    def test_a_reload_interval_that_is_not_a_positive_number_is_a_usage_error(
        self,
        served: list[tuple[Policy, ServeSettings]],
        capsys: pytest.CaptureFixture[str],
        interval: str,
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--reload-interval", interval])

        assert exited.value.code == 2
        assert served == []
        assert "--reload-interval" in capsys.readouterr().err

    def test_serve_is_told_the_name_the_install_gave_its_objects(
        self, served: list[tuple[Policy, ServeSettings]]
    ) -> None:
        assert main(["serve", "--install-name", "acme-gpu"]) == 0

        [(_, settings)] = served
        assert settings.install_name == "acme-gpu"

    def test_without_an_install_name_serve_looks_for_the_objects_every_install_names(
        self, served: list[tuple[Policy, ServeSettings]]
    ) -> None:
        assert main(["serve"]) == 0

        [(_, settings)] = served
        assert settings.install_name == "gpu-admission"

    def test_serve_is_told_kube_apiservers_addresses(
        self, served: list[tuple[Policy, ServeSettings]]
    ) -> None:
        args = ["serve", "--apiserver-source", "10.0.0.10", "--apiserver-source", "fd00::/64"]
        assert main(args) == 0

        [(_, settings)] = served
        assert settings.limits.apiserver_sources == ("10.0.0.10/32", "fd00::/64")

    def test_an_apiserver_source_that_is_no_address_is_a_usage_error(
        self, served: list[tuple[Policy, ServeSettings]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["serve", "--apiserver-source", "control-plane"])

        assert exited.value.code == 2
        assert served == []
        assert "'control-plane' is not an IP address or CIDR" in capsys.readouterr().err

    @pytest.mark.parametrize("name", ["Acme", "acme_gpu", "-acme", "a" * 39, ""])
    def test_an_install_name_that_cannot_name_its_objects_is_a_usage_error(
        self,
        served: list[tuple[Policy, ServeSettings]],
        capsys: pytest.CaptureFixture[str],
        name: str,
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["serve", f"--install-name={name}"])

        assert exited.value.code == 2
        assert served == []
        assert "cannot name an install: it must be a DNS label" in capsys.readouterr().err

    @pytest.mark.parametrize("given", ["--tls-cert", "--tls-key"])
    def test_serve_with_only_one_of_certificate_and_key_exits_2_without_serving(
        self,
        served: list[tuple[Policy, ServeSettings]],
        capsys: pytest.CaptureFixture[str],
        given: str,
    ) -> None:
        code = main(["serve", given, "/tmp/tls.pem"])

        assert code == 2
        assert served == []
        assert "give both --tls-cert and --tls-key, or neither" in capsys.readouterr().err

    def test_serve_refuses_a_broken_policy_with_exit_2_naming_file_path_and_reason(
        self,
        served: list[tuple[Policy, ServeSettings]],
        capsys: pytest.CaptureFixture[str],
        tmp_path: Path,
    ) -> None:
        path = broken_default(tmp_path, "pools: [training]", "pools: [trainig]")

        code = main(["serve", "--policy", str(path)])

        assert code == 2
        assert served == []
        err = capsys.readouterr().err
        line = line_of(path, "pools: [trainig]")
        assert err.startswith(
            f"gpu-admission: refusing to serve a broken policy: {path}:{line}: "
            "classes.training.pools[0]: "
        )
        assert "unknown pool 'trainig'" in err

    def test_serve_refuses_a_policy_naming_a_rule_the_engine_does_not_have(
        self,
        served: list[tuple[Policy, ServeSettings]],
        capsys: pytest.CaptureFixture[str],
        tmp_path: Path,
    ) -> None:
        path = tmp_path / "typo.yaml"
        path.write_text(default_policy_text() + UNKNOWN_RULE, "utf-8")

        code = main(["serve", "--policy", str(path)])

        assert code == 2
        assert served == []
        line = len(path.read_text("utf-8").splitlines())
        assert capsys.readouterr().err.startswith(
            f"gpu-admission: refusing to serve a broken policy: {path}:{line}: "
            "enforcement.rules.gpu-cout: unknown rule 'gpu-cout'; rules: "
        )


class TestServeInventory:
    @pytest.fixture(autouse=True)
    def outside_a_cluster(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)

    def test_outside_a_cluster_without_a_kubeconfig_the_inventory_is_off(
        self, served: list[tuple[Policy, ServeSettings]]
    ) -> None:
        assert main(["serve"]) == 0

        [(_, settings)] = served
        assert settings.inventory is False

    def test_a_kubeconfig_turns_the_inventory_on(
        self, served: list[tuple[Policy, ServeSettings]], tmp_path: Path
    ) -> None:
        kubeconfig = tmp_path / "kubeconfig"

        assert main(["serve", "--kubeconfig", str(kubeconfig)]) == 0

        [(_, settings)] = served
        assert (settings.inventory, settings.kubeconfig) == (True, kubeconfig)

    def test_inside_a_cluster_the_inventory_is_on_unless_turned_off(
        self, served: list[tuple[Policy, ServeSettings]], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")

        assert main(["serve"]) == 0
        assert main(["serve", "--no-inventory"]) == 0

        [(_, on), (_, off)] = served
        assert (on.inventory, on.kubeconfig) == (True, None)
        assert off.inventory is False

    def test_asking_for_the_inventory_outside_a_cluster_without_a_kubeconfig_exits_2(
        self, served: list[tuple[Policy, ServeSettings]], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["serve", "--inventory"]) == 2

        assert served == []
        assert "--inventory needs --kubeconfig outside a cluster" in capsys.readouterr().err
