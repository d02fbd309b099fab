"""`gpu-admission completion bash|zsh|fish` (webhook/cli/completion.py), run by a real shell."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from webhook.cli.completion import command_specs
from webhook.cli.main import COMMAND_GROUPS, full_parser, main

Capture = pytest.CaptureFixture[str]

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")

COMPLETE = """
complete_line() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
    _gpu_admission
    printf '%s\\n' "${COMPREPLY[@]}"
}
"""


def script(shell: str, capsys: Capture) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


@pytest.fixture
def bash_script(tmp_path: Path, capsys: Capture) -> Path:
    path = tmp_path / "gpu-admission.bash"
    path.write_text(script("bash", capsys), "utf-8")
    return path


def completed(bash_script: Path, words: list[str], cwd: Path | None = None) -> list[str]:
    """What bash, with the script sourced, offers for the last of `words` (the word at the
    cursor, "" for a fresh one)."""
    quoted = " ".join(f"'{word}'" for word in ["gpu-admission", *words])
    done = subprocess.run(
        [
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            f"source {bash_script}\n{COMPLETE}\ncomplete_line {quoted}",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    assert done.stderr == ""
    return done.stdout.splitlines()


@needs_bash
class TestBash:
    def test_sourcing_the_script_registers_the_completion_function(self, bash_script: Path) -> None:
        done = subprocess.run(
            [
                "bash",
                "--norc",
                "--noprofile",
                "-c",
                f"source {bash_script}; complete -p gpu-admission",
            ],
            capture_output=True,
            text=True,
            check=True,
        )

        assert done.stdout == "complete -F _gpu_admission gpu-admission\n"

    def test_the_first_word_is_a_command(self, bash_script: Path) -> None:
        assert completed(bash_script, [""]) == [
            name for group in COMMAND_GROUPS for name in group.commands
        ]
        assert "check" in completed(bash_script, [""])
        assert completed(bash_script, ["po"]) == ["policy"]

    def test_a_command_group_offers_its_subcommands(self, bash_script: Path) -> None:
        assert completed(bash_script, ["policy", ""]) == ["validate", "schema", "test", "init"]
        assert completed(bash_script, ["policy", "t"]) == ["test"]

    def test_options_are_those_of_the_command_so_far(self, bash_script: Path) -> None:
        assert completed(bash_script, ["check", "--"]) == [
            "--help", "--filename", "--policy", "--output", "--detailed", "--verbose",
            "--only-denied", "--warnings-exit-code", "--admitted", "--print-schema",
        ]  # fmt: skip
        assert completed(bash_script, ["--v"]) == ["--version"]

    def test_an_option_with_choices_offers_them(self, bash_script: Path) -> None:
        assert completed(bash_script, ["check", "--output", ""]) == [
            "text",
            "json",
            "yaml",
            "junit",
        ]
        assert completed(bash_script, ["check", "-o", "j"]) == ["json", "junit"]
        assert completed(bash_script, ["completion", ""]) == ["bash", "zsh", "fish"]

    def test_files_are_offered_where_a_file_is_taken_and_folders_where_a_folder_is(
        self, bash_script: Path, tmp_path: Path
    ) -> None:
        (tmp_path / "apps").mkdir()
        (tmp_path / "app.yaml").write_text("", "utf-8")

        assert sorted(completed(bash_script, ["check", "ap"], tmp_path)) == ["app.yaml", "apps"]
        # policy test takes a case file as well as a folder of them.
        assert sorted(completed(bash_script, ["policy", "test", "ap"], tmp_path)) == [
            "app.yaml",
            "apps",
        ]
        assert sorted(
            completed(bash_script, ["policy", "schema", "--output-file", "ap"], tmp_path)
        ) == ["app.yaml", "apps"]
        assert completed(bash_script, ["check", "--policy", "app."], tmp_path) == ["app.yaml"]

    def test_policy_init_offers_its_options_the_shipped_policies_and_files(
        self, bash_script: Path, tmp_path: Path
    ) -> None:
        (tmp_path / "team.yaml").write_text("", "utf-8")

        assert completed(bash_script, ["policy", "init", "--"]) == ["--help", "--from", "--force"]
        assert completed(bash_script, ["policy", "init", "--from", ""]) == ["default", "overflow"]
        assert completed(bash_script, ["policy", "init", "te"], tmp_path) == ["team.yaml"]

    def test_an_options_value_is_not_taken_for_a_command(
        self, bash_script: Path, tmp_path: Path
    ) -> None:
        (tmp_path / "policy.yaml").write_text("", "utf-8")

        # `policy` after --policy is that option's value, not the policy command.
        assert completed(bash_script, ["check", "--policy", "policy", "--"]) == [
            "--help", "--filename", "--policy", "--output", "--detailed", "--verbose",
            "--only-denied", "--warnings-exit-code", "--admitted", "--print-schema",
        ]  # fmt: skip


ZSH_COMPLETE = """
complete_line() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()
    _gpu_admission
    print -r -- "${COMPREPLY[*]}"
}
"""


@needs_zsh
def test_zsh_registers_the_function_through_its_bash_layer_and_runs_it(
    tmp_path: Path, capsys: Capture
) -> None:
    path = tmp_path / "gpu-admission.zsh"
    path.write_text(script("zsh", capsys), "utf-8")
    # As zsh's bash layer calls it: bash's COMP_WORDS and COMP_CWORD; zsh itself filters.
    lines = [
        "complete -p | grep gpu-admission",
        "complete_line gpu-admission check -o ''",
        "complete_line gpu-admission policy ''",
        "complete_line gpu-admission check --policy policy --",
    ]

    done = subprocess.run(
        ["zsh", "-f", "-c", f"source {path}\n{ZSH_COMPLETE}\n" + "\n".join(lines)],
        capture_output=True,
        text=True,
        check=True,
    )

    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "complete -F _gpu_admission gpu-admission",
        "text json yaml junit",
        "validate schema test init",
        "-h --help -f --filename --policy --output -o --detailed -v --verbose --only-denied "
        "--warnings-exit-code --admitted --print-schema",
    ]


def fish_completed(script_path: Path, line: str, cwd: Path | None = None) -> list[str]:
    """What fish, with the script sourced, offers for `line` (its candidates, without
    their descriptions)."""
    done = subprocess.run(
        ["fish", "--no-config", "-c", f"source {script_path}; complete -C '{line}'"],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    assert done.stderr == ""
    return [candidate.split("\t", 1)[0] for candidate in done.stdout.splitlines()]


@needs_fish
class TestFish:
    @pytest.fixture
    def fish_script(self, tmp_path: Path, capsys: Capture) -> Path:
        path = tmp_path / "gpu-admission.fish"
        path.write_text(script("fish", capsys), "utf-8")
        return path

    def test_the_first_word_is_a_command_and_a_group_offers_its_subcommands(
        self, fish_script: Path
    ) -> None:
        assert fish_completed(fish_script, "gpu-admission che") == ["check"]
        assert fish_completed(fish_script, "gpu-admission policy ") == [
            "init",
            "schema",
            "test",
            "validate",
        ]

    def test_an_option_with_choices_offers_them(self, fish_script: Path) -> None:
        assert fish_completed(fish_script, "gpu-admission check -o ") == [
            "json",
            "junit",
            "text",
            "yaml",
        ]
        assert fish_completed(fish_script, "gpu-admission completion ") == ["bash", "fish", "zsh"]

    def test_files_are_offered_where_a_file_is_taken(
        self, fish_script: Path, tmp_path: Path
    ) -> None:
        (tmp_path / "apps").mkdir()
        (tmp_path / "app.yaml").write_text("", "utf-8")

        assert fish_completed(fish_script, "gpu-admission check ap", tmp_path) == [
            "app.yaml",
            "apps/",
        ]
        assert fish_completed(fish_script, "gpu-admission serve ap", tmp_path) == []

    def test_an_options_value_is_not_taken_for_a_command(self, fish_script: Path) -> None:
        offered = fish_completed(fish_script, "gpu-admission check --policy policy --")

        assert "--warnings-exit-code" in offered
        assert "--run" not in offered  # `policy test`'s, which `policy` here is not


def test_the_script_covers_every_command_of_the_parser(capsys: Capture) -> None:
    text = script("bash", capsys)

    for spec in command_specs(full_parser()):
        assert f'"{spec.path}")' in text or not (spec.options or spec.subcommands)
        for name in spec.subcommands:
            assert f'"{spec.path} {name}"' in text
