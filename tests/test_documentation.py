"""The documents read as the project promises: the README starts with the user, no
paragraph or bullet runs over 150 words, and every link between them lands.

Paragraphs are counted as a reader meets them: code blocks, tables and HTML comments
are not prose; a bullet or numbered item counts on its own. The run records of
benchmarks (BENCHMARKS.md, docs/benchmark-history.md) are figures, not prose, and are
left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDS = {Path("BENCHMARKS.md"), Path("docs/benchmark-history.md")}
WORDS = 150


def documents() -> list[Path]:
    found = {
        path.relative_to(ROOT)
        for pattern in (
            "*.md",
            "docs/**/*.md",
            "deploy/**/*.md",
            "tests/**/*.md",
            "benchmarks/**/*.md",
        )
        for path in ROOT.glob(pattern)
    }
    return sorted(found - RECORDS)


def prose(text: str) -> list[str]:
    """The paragraphs and list items of Markdown `text`, without code, tables or comments."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    blocks = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.lstrip().startswith("|"):
            continue
        blocks += re.split(r"\n(?=\s*(?:[-*]|\d+\.) )", paragraph)
    return [block for block in blocks if block.strip()]


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of `text`."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def links(text: str) -> list[str]:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("document", documents(), ids=str)
def test_no_paragraph_or_bullet_runs_over_150_words(document: Path) -> None:
    long = [
        f"{len(block.split())} words: {' '.join(block.split()[:12])} ..."
        for block in prose((ROOT / document).read_text("utf-8"))
        if len(block.split()) > WORDS
    ]
    assert not long, "\n".join(long)


@pytest.mark.parametrize("document", documents(), ids=str)
def test_every_relative_link_lands_on_a_file_and_heading_that_exist(document: Path) -> None:
    broken = []
    for target in links((ROOT / document).read_text("utf-8")):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        landing = (ROOT / document).parent / path if path else ROOT / document
        if not landing.exists():
            broken.append(f"{target}: no such file")
        elif (
            anchor and landing.suffix == ".md" and anchor not in anchors(landing.read_text("utf-8"))
        ):
            broken.append(f"{target}: no such heading")
    assert not broken, "\n".join(broken)


def test_the_readme_opens_with_the_two_set_up_commands_then_says_what_it_does() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    first_block = re.search(r"^```sh\n(.*?)^```", readme, flags=re.S | re.M)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make serve", "make test"]
    assert readme.index("```sh") < readme.index("gpu-admission.io/workload")


def test_the_readmes_first_screen_leads_to_the_demo_and_the_documents() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    first_screen = "\n".join(readme.splitlines()[:25])
    assert "make demo" in first_screen
    for document in ("docs/cli.md", "docs/policy.md", "docs/install.md", "CONTRIBUTING.md"):
        assert f"]({document})" in readme
