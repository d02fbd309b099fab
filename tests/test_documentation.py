"""The documents read as the project promises: the README starts with the user, no
paragraph or bullet runs over 150 words, and every link between them lands.

The Markdown is read by a CommonMark parser (markdown-it-py, with GitHub's tables), as
a reader's renderer reads it: paragraphs are prose, each list item's on its own; code
(fenced or indented), tables and HTML are not, and a link's address is no word. Links
are every link the parser finds: inline, by reference, with a title, and `<a href>`.
The run records of benchmarks (BENCHMARKS.md, docs/benchmark-history.md) are figures,
not prose, and are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parent.parent
RECORDS = {Path("BENCHMARKS.md"), Path("docs/benchmark-history.md")}
WORDS = 150
PARSER = MarkdownIt("commonmark").enable("table")
HTML_HREF = re.compile(r"""<a\s[^>]*\bhref\s*=\s*["']([^"']+)["']""", re.I)


def documents() -> list[Path]:
    found = {
        path.relative_to(ROOT)
        for pattern in (
            "*.md",
            "docs/**/*.md",
            "deploy/**/*.md",
            "examples/**/*.md",
            "tests/**/*.md",
            "benchmarks/**/*.md",
        )
        for path in ROOT.glob(pattern)
    }
    return sorted(found - RECORDS)


def tokens(text: str) -> list[Token]:
    return PARSER.parse(text)


def _words(inline: Token) -> str:
    """What a reader reads of an inline token: its text and code, not link addresses."""
    parts = [
        " " if child.type in ("softbreak", "hardbreak") else child.content
        for child in inline.children or []
        if child.type in ("text", "code_inline", "softbreak", "hardbreak")
    ]
    return "".join(parts)


def prose(text: str) -> list[str]:
    """The paragraphs of Markdown `text` (a list item's paragraph on its own), without
    code, tables or HTML."""
    found = tokens(text)
    return [
        _words(found[index + 1])
        for index, token in enumerate(found)
        if token.type == "paragraph_open" and found[index + 1].type == "inline"
    ]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    found = tokens(text)
    return {
        slug(_words(found[index + 1]))
        for index, token in enumerate(found)
        if token.type == "heading_open"
    }


def links(text: str) -> Iterator[str]:
    for token in tokens(text):
        if token.type == "html_block":
            yield from HTML_HREF.findall(token.content)
        for child in token.children or []:
            if child.type == "link_open":
                yield str(child.attrs["href"])
            elif child.type == "html_inline":
                yield from HTML_HREF.findall(child.content)


def broken_links(document: Path) -> list[str]:
    broken = []
    for target in links(document.read_text("utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, anchor = target.partition("#")
        landing = document.parent / path if path else document
        if not landing.exists():
            broken.append(f"{target}: no such file")
        elif (
            anchor and landing.suffix == ".md" and anchor not in anchors(landing.read_text("utf-8"))
        ):
            broken.append(f"{target}: no such heading")
    return broken


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
    broken = broken_links(ROOT / document)
    assert not broken, "\n".join(broken)


def test_links_of_every_form_are_followed_and_code_is_not_prose(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# A heading\n")
    document = tmp_path / "page.md"
    document.write_text(
        '[inline](gone.md) and [titled](gone-titled.md "a title") and [by reference][r]\n'
        'and <a href="gone-html.md">html</a> and [a heading](there.md#a-heading)\n'
        "and [no heading](there.md#nowhere) and [away](https://example.com/x).\n\n"
        "[r]: gone-reference.md\n\n"
        "    indented code [not a link](gone-code.md) " + "word " * 200 + "\n"
    )

    assert broken_links(document) == [
        "gone.md: no such file",
        "gone-titled.md: no such file",
        "gone-reference.md: no such file",
        "gone-html.md: no such file",
        "there.md#nowhere: no such heading",
    ]
    assert [len(block.split()) for block in prose(document.read_text())] == [16]


def test_the_readme_opens_with_the_two_set_up_commands_then_says_what_it_does() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    first_block = re.search(r"^```sh\n(.*?)^```", readme, flags=re.S | re.M)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make serve", "make test"]
    assert readme.index("```sh") < readme.index("gpu-admission.io/workload")


def test_the_readme_leads_from_its_first_screen_to_the_demo_then_to_the_documents() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    first_screen = "\n".join(readme.splitlines()[:25])
    sections = re.split(r"^## ", readme, flags=re.M)
    headings = [section.split("\n", 1)[0] for section in sections[1:]]

    assert "make demo" in first_screen
    assert headings[:2] == ["See it in a minute", "Then"]
    for document in ("docs/cli.md", "docs/policy.md", "docs/install.md", "CONTRIBUTING.md"):
        assert f"]({document})" in sections[2]
