"""What `gpu-admission` imports to start (webhook/cli/main.py): only the group of the command
given, so `--help` and `--version` start without pydantic, the Kubernetes client, ...

Checked by the modules a fresh interpreter holds afterwards, not by timing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from importlib.metadata import version

import pytest

from webhook.cli.main import COMMAND_GROUPS, CommandGroup, build_parser, full_parser, main

HEAVY = ("kubernetes", "fastapi", "starlette", "uvicorn", "cryptography", "pydantic", "yaml")
"""What a command imports only when it needs it."""

PROBE = """
import json, sys
from webhook.cli.main import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit:
    pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def imported_by(*code: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after running `code`."""
    script = "\n".join([*code, "import sys, json", "print(json.dumps(sorted(sys.modules)))"])
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return {name.split(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}


def imported_running(argv: list[str]) -> set[str]:
    """The top-level packages a fresh interpreter holds after `gpu-admission ARGV`."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True
    )
    return set(json.loads(done.stderr.splitlines()[-1]))


def test_importing_the_command_imports_none_of_the_heavy_packages() -> None:
    imported = imported_by("import webhook.cli.main")

    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))
    assert "webhook" in imported


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], ["check", "--help"], ["policy", "--help"], ["no-such-command"]],
    ids=" ".join,
)
def test_help_and_version_start_without_the_heavy_packages(argv: list[str]) -> None:
    imported = imported_running(argv)

    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


def test_a_command_imports_what_it_needs_when_it_runs() -> None:
    assert {"pydantic", "yaml"} <= imported_running(["policy", "schema"])


class TestCommandGroups:
    def test_the_help_listing_every_command_is_the_one_of_the_full_parser(self) -> None:
        assert build_parser().format_help() == full_parser().format_help()

    @pytest.mark.parametrize("group", COMMAND_GROUPS, ids=lambda g: " ".join(g.commands))
    def test_each_group_names_the_commands_its_module_adds_with_their_help(
        self, group: CommandGroup
    ) -> None:
        parser = argparse.ArgumentParser()
        commands = parser.add_subparsers()

        group.add(commands)

        assert {a.dest: a.help for a in commands._choices_actions} == dict(group.commands)

    def test_a_command_given_gets_its_full_parser_and_the_others_only_a_name(self) -> None:
        parser = build_parser("check")
        [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]

        assert "--output" in commands.choices["check"].format_help()
        assert commands.choices["serve"]._actions == []

    def test_a_command_line_parses_with_only_its_group(self) -> None:
        args = build_parser("check").parse_args(["check", "-o", "junit", "a.yaml"])

        assert (args.output, args.files) == ("junit", ["a.yaml"])


class TestVersion:
    def test_version_prints_the_installed_packages_version(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(SystemExit) as exited:
            main(["--version"])

        assert exited.value.code == 0
        assert capsys.readouterr().out == f"gpu-admission {version('gpu-admission')}\n"

    def test_the_installed_command_prints_it_too(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "webhook.cli", "--version"],
            capture_output=True,
            text=True,
            check=True,
        )

        assert done.stdout == f"gpu-admission {version('gpu-admission')}\n"
