"""The documents name the rules the engine knows: each list is written from the registry
(webhook/install/rule_lists.py), and the references that go rule by rule name them all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from webhook.engine.rules import RULES
from webhook.install.manifests import document_files, stale_files, sync
from webhook.install.rule_lists import (
    MARKDOWN_BEGIN,
    MARKDOWN_END,
    YAML_BEGIN,
    UnreadableRuleList,
    rule_list_documents,
    with_rule_lists,
)

ROOT = Path(__file__).resolve().parents[2]
LISTING = [
    "docs/policy.md",
    "docs/upgrade.md",
    "docs/webhooks.md",
    "webhook/policies/default.yaml",
]
REFERENCES = ["docs/troubleshooting.md", "docs/security.md"]
"""Documents with a row per way a pod is refused: every rule has one."""


def test_the_documents_that_list_the_rules_are_found() -> None:
    found = {str(path.relative_to(ROOT)) for path in rule_list_documents(ROOT)}
    assert found >= set(LISTING)


@pytest.mark.parametrize("document", LISTING)
def test_each_list_names_exactly_the_engines_rules_in_its_order(document: str) -> None:
    text = (ROOT / document).read_text("utf-8")
    assert with_rule_lists(text) == text, "stale: run `gpu-admission manifests sync`"
    listed = _listed(text)
    assert listed == list(RULES.names)


@pytest.mark.parametrize("document", LISTING)
def test_a_rule_added_to_the_engine_is_added_to_each_list(document: str) -> None:
    text = (ROOT / document).read_text("utf-8")
    names = (*RULES.names, "gpu-example")

    assert _listed(with_rule_lists(text, names)) == list(names)


def test_the_repository_holds_no_stale_list() -> None:
    documents = {str((ROOT / "deploy" / f.path).resolve()) for f in document_files(ROOT)}
    stale = {str(path.resolve()) for path in stale_files(ROOT / "deploy")}
    assert not documents & stale


def test_sync_writes_a_list_between_markers_and_leaves_the_rest(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(f"Before.\n\n{MARKDOWN_BEGIN}\n`old-rule`.\n{MARKDOWN_END}\n\nAfter.\n")

    (rewritten,) = document_files(tmp_path)

    assert rewritten.path == Path("../docs/page.md")
    assert rewritten.text.startswith("Before.\n\n") and rewritten.text.endswith("\n\nAfter.\n")
    assert _listed(rewritten.text) == list(RULES.names)


@pytest.mark.parametrize("document", REFERENCES)
def test_each_rule_by_rule_reference_names_every_rule(document: str) -> None:
    text = (ROOT / document).read_text("utf-8")
    missing = [name for name in RULES.names if f"`{name}`" not in text]
    assert not missing


def _listed(text: str) -> list[str]:
    if MARKDOWN_BEGIN in text:
        block = text.split(MARKDOWN_BEGIN, 1)[1].split(MARKDOWN_END, 1)[0]
        return re.findall(r"`([^`]+)`", block)
    block = text.split(YAML_BEGIN + "\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if not line.startswith("#   "):
            break
        lines.append(line[4:])
    return [name.strip(" .") for name in " ".join(lines).split(",")]


def test_a_list_ends_at_its_full_stop_and_the_comments_after_it_stay() -> None:
    text = f"{YAML_BEGIN}\n#   old-rule.\n#   a note of the document's own\nkey: 1\n"

    rewritten = with_rule_lists(text)

    assert rewritten.endswith("#   claims-not-judged.\n#   a note of the document's own\nkey: 1\n")


def test_a_document_of_crlf_lines_is_rewritten_in_its_own_line_endings() -> None:
    text = f"a\r\n{MARKDOWN_BEGIN}\r\n`old-rule`.\r\n{MARKDOWN_END}\r\nb\r\n"

    rewritten = with_rule_lists(text)

    assert _listed(rewritten.replace("\r\n", "\n")) == list(RULES.names)
    assert "\n" not in rewritten.replace("\r\n", "")


@pytest.mark.parametrize(
    "text",
    [
        f"{MARKDOWN_BEGIN}\n`a`.\n\nkept\n\n{MARKDOWN_BEGIN}\n`b`.\n{MARKDOWN_END}\n",
        f"{YAML_BEGIN}\n#   no full stop\nkey: 1\n",
    ],
    ids=["markdown without its end", "yaml without its full stop"],
)
def test_a_list_whose_end_cannot_be_found_is_refused_not_overwritten(text: str) -> None:
    with pytest.raises(UnreadableRuleList):
        with_rule_lists(text)


def repository(root: Path) -> Path:
    """A repository's bare bones at `root`: its pyproject.toml, deploy/ and docs/."""
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (root / "deploy").mkdir()
    (root / "docs").mkdir()
    return root / "deploy"


def test_sync_run_inside_deploy_finds_the_documents_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository(tmp_path)
    (tmp_path / "docs" / "page.md").write_text(f"{MARKDOWN_BEGIN}\n`old`.\n{MARKDOWN_END}\n")
    monkeypatch.chdir(tmp_path / "deploy")

    assert [f.path for f in document_files(Path(".").resolve().parent)] == [Path("../docs/page.md")]
    assert Path("../docs/page.md") in stale_files(Path("."))


def test_sync_keeps_a_crlf_document_crlf_on_disk(tmp_path: Path) -> None:
    deploy = repository(tmp_path)
    page = tmp_path / "docs" / "page.md"
    page.write_bytes(f"a\r\n{MARKDOWN_BEGIN}\r\n`old`.\r\n{MARKDOWN_END}\r\nb\r\n".encode())

    assert page in sync(deploy)

    written = page.read_bytes()
    assert b"`visible-devices`" in written
    assert b"\n" not in written.replace(b"\r\n", b"")
    assert page not in stale_files(deploy)


def test_a_deploy_folder_in_no_repository_leaves_its_neighbours_alone(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    notes = tmp_path / "notes.md"
    notes.write_text(f"{MARKDOWN_BEGIN}\n`old`.\n{MARKDOWN_END}\n")

    sync(tmp_path / "deploy")

    assert notes.read_text() == f"{MARKDOWN_BEGIN}\n`old`.\n{MARKDOWN_END}\n"


def test_a_yaml_list_that_lost_its_full_stop_is_refused_not_run_on_into_the_notes() -> None:
    text = f"{YAML_BEGIN}\n#   a, b\n#   Our own note about pools.\nkey: 1\n"

    with pytest.raises(UnreadableRuleList):
        with_rule_lists(text)
