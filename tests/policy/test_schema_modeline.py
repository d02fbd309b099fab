"""The `# yaml-language-server: $schema=` line of a policy file (webhook/policy/schema_modeline.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.policy.load import default_policy_text
from webhook.policy.schema_modeline import (
    Modeline,
    missing_schema,
    modeline,
    naming_schema,
    without_modeline,
)

POLICY = "apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("# yaml-language-server: $schema=schema.json\n" + POLICY, Modeline(1, "schema.json")),
        ("# a policy\n#  yaml-language-server : $schema=../s.json\n", Modeline(2, "../s.json")),
        ("  # yaml-language-server: $schema=s.json other=1\n", Modeline(1, "s.json")),
        ("# $schema: https://example.com/s.json\n", Modeline(1, "https://example.com/s.json")),
        ("# yaml-language-server: $format.date=true\n# $schema: s.json\n", None),
        ("#yaml-language-server: $schema=s.json\n", None),
        ("key: 1 # yaml-language-server: $schema=s.json\n", None),
        (POLICY, None),
    ],
    ids=[
        "first-line",
        "spaces",
        "indented",
        "colon-form",
        "first-without-schema",
        "no-space",
        "after-a-value",
        "none",
    ],
)
def test_the_schema_line_is_the_first_whole_line_comment_the_language_server_reads(
    text: str, found: Modeline | None
) -> None:
    assert modeline(text) == found


def test_the_shipped_default_policy_names_the_schema_beside_it() -> None:
    assert modeline(default_policy_text()) == Modeline(1, "schema.json")


def test_a_schema_named_relative_to_the_policy_that_is_not_there_is_a_warning(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "team.yaml"

    warning = missing_schema(policy, default_policy_text())

    assert warning == (
        f"{policy}:1: warning: $schema=schema.json names {tmp_path / 'schema.json'}, which is "
        "not there: editors check this policy against no schema; write it with "
        f"`gpu-admission policy schema --output-file {tmp_path / 'schema.json'}` "
        "(`gpu-admission policy init FILE` writes a policy and its schema together)"
    )


def test_a_schema_that_is_there_relative_or_absolute_is_no_warning(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "policy.json").write_text("{}", "utf-8")
    (tmp_path / "team#1.schema.json").write_text("{}", "utf-8")
    policy = tmp_path / "team.yaml"

    for named in (
        "schemas/policy.json",
        str(tmp_path / "schemas" / "policy.json"),
        "./team#1.schema.json",
    ):
        assert missing_schema(policy, f"# yaml-language-server: $schema={named}\n") is None


def test_a_path_is_read_whole_a_hash_in_it_being_no_fragment(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "policy.json").write_text("{}", "utf-8")
    policy = tmp_path / "team.yaml"

    warning = missing_schema(policy, "# yaml-language-server: $schema=schemas/policy.json#/x\n")

    assert warning is not None and "policy.json#/x, which is not there" in warning


def test_an_absolute_path_that_is_not_there_and_a_folder_are_warnings(tmp_path: Path) -> None:
    policy = tmp_path / "team.yaml"

    assert missing_schema(policy, f"# yaml-language-server: $schema={tmp_path / 'no.json'}\n")
    assert missing_schema(policy, "# yaml-language-server: $schema=.\n")


def test_a_url_or_no_schema_line_is_no_warning(tmp_path: Path) -> None:
    policy = tmp_path / "team.yaml"

    assert missing_schema(policy, "# yaml-language-server: $schema=https://h/s.json\n") is None
    assert missing_schema(policy, "# yaml-language-server: $schema=file:///no/s.json\n") is None
    assert missing_schema(policy, POLICY) is None


def test_naming_a_schema_rewrites_the_line_in_place_and_nothing_else() -> None:
    text = "# yaml-language-server: $schema=schema.json other\n" + POLICY

    assert naming_schema(text, "team.schema.json") == (
        "# yaml-language-server: $schema=team.schema.json other\n" + POLICY
    )
    assert naming_schema(POLICY, "team.schema.json") == (
        "# yaml-language-server: $schema=team.schema.json\n" + POLICY
    )
    renamed = naming_schema(default_policy_text(), "team.schema.json")
    assert renamed.splitlines()[1:] == default_policy_text().splitlines()[1:]
    assert modeline(renamed) == Modeline(1, "team.schema.json")


def test_the_colon_form_keeps_its_form_when_renamed() -> None:
    renamed = naming_schema("# $schema: schema.json\n" + POLICY, "./team.schema.json")

    assert renamed == "# $schema: ./team.schema.json\n" + POLICY
    assert modeline(renamed) == Modeline(1, "./team.schema.json")


def test_the_command_the_warning_gives_runs_as_printed_in_a_folder_with_spaces(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "my policies" / "team.yaml"

    warning = missing_schema(policy, default_policy_text())

    schema = policy.parent / "schema.json"
    assert warning is not None
    assert f"`gpu-admission policy schema --output-file '{schema}'`" in warning


def test_a_path_too_long_to_look_for_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    policy = tmp_path / "team.yaml"

    warning = missing_schema(policy, f"# yaml-language-server: $schema={'a' * 300}\n")

    assert warning is not None
    assert "which cannot be looked for (File name too long)" in warning


def test_a_copy_without_its_schema_line_keeps_every_other_line() -> None:
    text = "# a policy\n# yaml-language-server: $schema=schema.json\n" + POLICY

    assert without_modeline(text) == "# a policy\n" + POLICY
    assert without_modeline(POLICY) == POLICY
