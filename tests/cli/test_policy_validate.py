"""`gpu-admission policy validate` (webhook/cli/policy_validate.py), called through `main(argv)`."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from webhook.cli.main import main
from webhook.engine import RULES
from webhook.policy.load import default_policy_text
from webhook.policy.schema import policy_schema_text

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED_POLICIES = [
    REPOSITORY / "policies" / "default.yaml",
    REPOSITORY / "policies" / "overflow.yaml",
    REPOSITORY / "webhook" / "policies" / "default.yaml",
    REPOSITORY / "webhook" / "policies" / "overflow.yaml",
]
UNKNOWN_RULE = "\nenforcement:\n  rules: {gpu-cout: warn}\n"
"""A rule name with a typo, which the engine refuses."""

Capture = pytest.CaptureFixture[str]


def broken_default(tmp_path: Path, *replacements: tuple[str, str]) -> Path:
    """The default policy with the first of each `old` replaced by `new`, written to a file
    beside the schema its first line names (as `policy init` leaves it)."""
    text = default_policy_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / "broken.yaml"
    path.write_text(text, "utf-8")
    (tmp_path / "schema.json").write_text(policy_schema_text(RULES.names), "utf-8")
    return path


def line_of(path: Path, fragment: str, occurrence: int = 0) -> int:
    """The 1-based number of the line of `path` that contains `fragment`."""
    lines = path.read_text("utf-8").splitlines()
    return [n for n, line in enumerate(lines, start=1) if fragment in line][occurrence]


@pytest.mark.parametrize("path", SHIPPED_POLICIES, ids=lambda p: str(p.relative_to(REPOSITORY)))
def test_a_shipped_policy_validates_with_exit_code_0(path: Path, capsys: Capture) -> None:
    code = main(["policy", "validate", str(path)])

    out, err = capsys.readouterr()
    assert code == 0
    assert out == f"{path}: ok (2 pools, 2 classes)\n"
    assert err == ""


def test_several_policies_are_validated_in_one_call(capsys: Capture) -> None:
    code = main(["policy", "validate", *map(str, SHIPPED_POLICIES[:2])])

    out, _ = capsys.readouterr()
    assert code == 0
    assert out.splitlines() == [f"{p}: ok (2 pools, 2 classes)" for p in SHIPPED_POLICIES[:2]]


def test_every_problem_is_printed_as_file_line_path_reason(tmp_path: Path, capsys: Capture) -> None:
    path = broken_default(
        tmp_path,
        ("    gpusPerNode: 8\n    # taints", "    gpusPerNod: 8\n    # taints"),
        ("pools: [training]", "pools: [trainig]"),
    )
    path.write_text(path.read_text("utf-8") + UNKNOWN_RULE, "utf-8")

    code = main(["policy", "validate", str(path)])

    out, err = capsys.readouterr()
    rules = ", ".join(RULES.names)
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{path}:{line_of(path, '  inference:')}: pools.inference.gpusPerNode: "
        "missing required key 'gpusPerNode'",
        f"{path}:{line_of(path, 'gpusPerNod:')}: pools.inference.gpusPerNod: "
        "unknown key 'gpusPerNod' in pools.inference; did you mean 'gpusPerNode'?",
        f"{path}:{line_of(path, '[trainig]')}: classes.training.pools[0]: "
        "unknown pool 'trainig'; pools: inference, training",
        f"{path}:{line_of(path, 'gpu-cout')}: enforcement.rules.gpu-cout: "
        f"unknown rule 'gpu-cout'; rules: {rules}",
    ]


def test_a_pool_given_twice_is_reported_with_both_lines(tmp_path: Path, capsys: Capture) -> None:
    path = broken_default(
        tmp_path, ("  training:\n    gpusPerNode: 8", "  inference:\n    gpusPerNode: 8")
    )

    code = main(["policy", "validate", str(path)])

    _, err = capsys.readouterr()
    first, again = line_of(path, "  inference:", 0), line_of(path, "  inference:", 1)
    assert code == 1
    assert (
        f"{path}:{again}: pools.inference: duplicate key 'inference': given at line {first} "
        f"and again at line {again}; YAML would keep only the last"
    ) in err.splitlines()


def test_a_yaml_syntax_error_is_reported_with_its_line_and_column(
    tmp_path: Path, capsys: Capture
) -> None:
    path = broken_default(tmp_path, ("    gpusPerNode: 8\n", "\tgpusPerNode: 8\n"))

    code = main(["policy", "validate", str(path)])

    _, err = capsys.readouterr()
    assert code == 1
    assert err == (
        f"{path}:{line_of(path, chr(9) + 'gpusPerNode')}: not valid YAML: "
        "found character '\\t' that cannot start any token (column 1)\n"
    )


def test_a_misplaced_colon_is_reported_at_its_column(tmp_path: Path, capsys: Capture) -> None:
    path = broken_default(tmp_path, ("kind: Policy\n", "kind: Policy: yes\n"))

    code = main(["policy", "validate", str(path)])

    _, err = capsys.readouterr()
    assert code == 1
    assert err == (
        f"{path}:{line_of(path, 'kind: Policy: yes')}: not valid YAML: "
        "mapping values are not allowed here (column 13)\n"
    )


def test_a_missing_file_is_reported_and_fails(tmp_path: Path, capsys: Capture) -> None:
    path = tmp_path / "absent.yaml"

    code = main(["policy", "validate", str(path)])

    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith(f"{path}: cannot read: ")


def test_the_mig_catalog_is_not_a_policy(capsys: Capture) -> None:
    path = REPOSITORY / "policies" / "mig-profiles.yaml"

    code = main(["policy", "validate", str(path)])

    _, err = capsys.readouterr()
    assert code == 1
    assert err.startswith(f"{path}:")


def test_one_broken_file_fails_the_call_but_the_others_are_still_checked(
    tmp_path: Path, capsys: Capture
) -> None:
    broken = broken_default(tmp_path, ("pools: [training]", "pools: [gpu]"))
    good = SHIPPED_POLICIES[0]

    code = main(["policy", "validate", str(broken), str(good)])

    out, err = capsys.readouterr()
    assert code == 1
    assert out == f"{good}: ok (2 pools, 2 classes)\n"
    assert err.startswith(f"{broken}:{line_of(broken, '[gpu]')}: classes.training.pools[0]: ")


def test_validate_without_files_is_a_usage_error(capsys: Capture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["policy", "validate"])

    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("usage: gpu-admission policy validate ")
    assert "the following arguments are required: FILE" in err


def test_a_copy_away_from_the_schema_its_first_line_names_is_ok_with_a_warning_how_to_write_it(
    tmp_path: Path, capsys: Capture
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(default_policy_text(), "utf-8")

    code = main(["policy", "validate", str(path)])

    out, err = capsys.readouterr()
    schema = tmp_path / "schema.json"
    assert (code, out) == (0, f"{path}: ok (2 pools, 2 classes)\n")
    assert err == (
        f"{path}:1: warning: $schema=schema.json names {schema}, which is not there: editors "
        "check this policy against no schema; write it with "
        f"`gpu-admission policy schema --output-file {schema}` (`gpu-admission policy init "
        "FILE` writes a policy and its schema together)\n"
    )


def test_the_warning_comes_with_the_problems_of_a_broken_copy(
    tmp_path: Path, capsys: Capture
) -> None:
    path = broken_default(tmp_path, ("pools: [training]", "pools: [gpu]"))
    (tmp_path / "schema.json").unlink()

    code = main(["policy", "validate", str(path)])

    lines = capsys.readouterr().err.splitlines()
    assert code == 1
    assert lines[0].startswith(f"{path}:1: warning: $schema=schema.json names ")
    assert lines[1].startswith(f"{path}:{line_of(path, '[gpu]')}: classes.training.pools[0]: ")


def test_a_policy_read_from_standard_input_has_no_folder_to_look_in(
    monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(default_policy_text()))

    code = main(["policy", "validate", "-"])

    assert (code, capsys.readouterr()) == (0, ("-: ok (2 pools, 2 classes)\n", ""))
