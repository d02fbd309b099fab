"""`gpu-admission policy init FILE` (webhook/cli/policy_init.py), called through `main(argv)`."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from webhook.cli.main import main
from webhook.engine import RULES
from webhook.policy.schema import policy_schema_text
from webhook.policy.schema_modeline import Modeline, modeline
from webhook.policy.shipped import shipped_text

Capture = pytest.CaptureFixture[str]


def test_init_writes_the_default_policy_and_its_schema_beside_it_named_by_its_first_line(
    tmp_path: Path, capsys: Capture
) -> None:
    policy = tmp_path / "team.yaml"

    code = main(["policy", "init", str(policy)])

    out, err = capsys.readouterr()
    schema = tmp_path / "team.schema.json"
    text = policy.read_text("utf-8")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"wrote {policy} (the default policy)",
        f"wrote {schema} (its JSON Schema, named by {policy}'s first line)",
    ]
    assert modeline(text) == Modeline(1, "./team.schema.json")
    assert text.splitlines()[1:] == shipped_text("default.yaml").splitlines()[1:]
    assert schema.read_text("utf-8") == policy_schema_text(RULES.names)
    assert json.loads(schema.read_text("utf-8"))["title"] == "gpu-admission policy"


def test_the_policy_written_validates_without_a_warning_and_so_does_the_pair_moved(
    tmp_path: Path, capsys: Capture
) -> None:
    policy = tmp_path / "team.yml"
    assert main(["policy", "init", str(policy)]) == 0
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for name in ("team.yml", "team.schema.json"):
        (tmp_path / name).rename(moved / name)
    capsys.readouterr()

    code = main(["policy", "validate", str(moved / "team.yml")])

    assert (code, capsys.readouterr()) == (
        0,
        (f"{moved / 'team.yml'}: ok (2 pools, 2 classes)\n", ""),
    )


def test_from_names_the_shipped_policy_to_start_from(tmp_path: Path, capsys: Capture) -> None:
    policy = tmp_path / "overflow.yaml"

    code = main(["policy", "init", "--from", "overflow", str(policy)])

    text = policy.read_text("utf-8")
    assert (code, capsys.readouterr().out.splitlines()[0]) == (
        0,
        f"wrote {policy} (the overflow policy)",
    )
    assert text.splitlines()[1:] == shipped_text("overflow.yaml").splitlines()[1:]
    assert modeline(text) == Modeline(1, "./overflow.schema.json")


@pytest.mark.parametrize("existing", ["team.yaml", "team.schema.json"])
def test_an_existing_policy_or_schema_is_left_alone_and_nothing_is_written(
    tmp_path: Path, existing: str, capsys: Capture
) -> None:
    (tmp_path / existing).write_text("mine\n", "utf-8")

    code = main(["policy", "init", str(tmp_path / "team.yaml")])

    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (
        f"gpu-admission: {tmp_path / existing} already exists: nothing written; "
        "--force overwrites\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [existing]
    assert (tmp_path / existing).read_text("utf-8") == "mine\n"


def test_force_overwrites_both(tmp_path: Path, capsys: Capture) -> None:
    policy, schema = tmp_path / "team.yaml", tmp_path / "team.schema.json"
    for path in (policy, schema):
        path.write_text("mine\n", "utf-8")

    refused = main(["policy", "init", str(policy)])
    err = capsys.readouterr().err
    code = main(["policy", "init", "--force", str(policy)])

    assert (refused, code) == (2, 0)
    assert f"{policy} and {schema} already exist: nothing written; --force overwrites" in err
    assert modeline(policy.read_text("utf-8")) == Modeline(1, "./team.schema.json")
    assert schema.read_text("utf-8") == policy_schema_text(RULES.names)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("-", "policy init writes two files: name FILE, not - (standard output)"),
        ("team.json", "{path}: name the policy file *.yaml or *.yml, as policy validate DIR reads"),
        ("my team.yaml", "{path}: a name without spaces: the $schema line ends at the first one"),
        ("missing/team.yaml", "{path}: no folder {folder}"),
        ("folder.yaml", "{path} is a folder"),
        ("p" * 250 + ".yaml", "{path}: File name too long"),
        (
            "team\udcff.yaml",
            "{path!r}: a name in UTF-8: the policy's $schema line names its schema by it",
        ),
    ],
    ids=["stdin", "suffix", "space", "no-folder", "a-folder", "too-long", "not-utf-8"],
)
def test_a_file_init_cannot_write_is_a_usage_error_naming_why(
    tmp_path: Path, name: str, problem: str, capsys: Capture
) -> None:
    (tmp_path / "folder.yaml").mkdir()
    path = name if name == "-" else str(tmp_path / name)

    code = main(["policy", "init", path])

    out, err = capsys.readouterr()
    expected = problem.format(path=path, folder=tmp_path / "missing")
    assert (code, out, err) == (2, "", f"gpu-admission: {expected}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder.yaml"]


def test_init_without_a_file_is_a_usage_error(capsys: Capture) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["policy", "init"])

    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith("usage: gpu-admission policy init ")


def test_the_fix_the_validate_warning_names_silences_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
) -> None:
    # A copy of the shipped policy, as its header says to make one: the schema line names
    # schema.json, which is not beside the copy until the command the warning names runs.
    monkeypatch.chdir(tmp_path)
    Path("team.yaml").write_text(shipped_text("default.yaml"), "utf-8")

    assert main(["policy", "validate", "team.yaml"]) == 0
    warning = capsys.readouterr().err
    [command] = [
        part for part in warning.split("`") if part.startswith("gpu-admission policy schema")
    ]
    assert main(shlex.split(command)[1:]) == 0
    capsys.readouterr()

    assert main(["policy", "validate", "team.yaml"]) == 0
    assert capsys.readouterr() == ("team.yaml: ok (2 pools, 2 classes)\n", "")


def test_a_policy_named_like_a_url_names_its_schema_as_a_path(
    tmp_path: Path, capsys: Capture
) -> None:
    policy = tmp_path / "httpd.yaml"
    assert main(["policy", "init", str(policy)]) == 0

    found = modeline(policy.read_text("utf-8"))

    assert found is not None and found.is_path
    assert found.schema_path(policy) == tmp_path / "./httpd.schema.json"


def test_a_policy_with_a_hash_in_its_name_names_its_schema_whole(
    tmp_path: Path, capsys: Capture
) -> None:
    policy = tmp_path / "team#1.yaml"
    assert main(["policy", "init", str(policy)]) == 0

    assert main(["policy", "validate", str(policy)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_policy_that_cannot_be_written_leaves_no_schema_behind(
    tmp_path: Path, capsys: Capture
) -> None:
    policy = tmp_path / "team.yaml"
    policy.mkdir()  # found by nothing before the write: made between the checks and it
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("webhook.cli.policy_init._refusal", lambda *_: None)
        code = main(["policy", "init", str(policy)])

    assert code == 2
    assert f"cannot write {policy}: Is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team.yaml"]
