"""The lists of rule names in the documents, written from the engine's registry.

A document lists the rules only between markers, and `gpu-admission manifests sync`
writes each list from `webhook.engine.rules.RULES`, so the README, the docs and the
shipped policies' comments name the rules the engine knows, in its order:

- in Markdown, between `MARKDOWN_BEGIN` and `MARKDOWN_END`, as backquoted names;
- in a policy's YAML comments, on the `#   ` lines after `YAML_BEGIN`.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

from webhook.engine.rules import RULES
from webhook.errors import GpuAdmissionError

MARKDOWN_BEGIN = "<!-- rules: written from the engine by gpu-admission manifests sync -->"
MARKDOWN_END = "<!-- /rules -->"
YAML_BEGIN = "# The rules, by name (written from the engine by gpu-admission manifests sync):"
YAML_INDENT = "#   "
WIDTH = 88

_MARKDOWN = re.compile(
    re.escape(MARKDOWN_BEGIN) + r"\r?\n(?:(?!<!-- rules:).)*?" + re.escape(MARKDOWN_END), re.S
)
_NAMES = r"#   [a-z0-9-]+(?:, [a-z0-9-]+)*"
_YAML = re.compile("^" + re.escape(YAML_BEGIN) + rf"\r?\n(?:{_NAMES},\r?\n)*{_NAMES}\.\r?\n", re.M)
"""A list in YAML is lines of rule names, each but the last ending with a comma, the last
with a full stop: the comment lines after it are the document's own, and a list that lost
its full stop is refused rather than run on into them."""

DOCUMENT_GLOBS = ("*.md", "docs/**/*.md", "deploy/**/*.md", "webhook/policies/*.yaml")
"""Where, under the repository's root, documents may list the rules."""


def listed(names: Sequence[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{name}`" for name in names]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def markdown_block(names: Sequence[str]) -> str:
    lines = textwrap.wrap(listed(names) + ".", WIDTH, break_on_hyphens=False)
    return "\n".join([MARKDOWN_BEGIN, *lines, MARKDOWN_END])


def yaml_block(names: Sequence[str]) -> str:
    width = WIDTH - len(YAML_INDENT)
    lines = textwrap.wrap(", ".join(names) + ".", width, break_on_hyphens=False)
    return "\n".join([YAML_BEGIN, *(YAML_INDENT + line for line in lines)]) + "\n"


class UnreadableRuleList(GpuAdmissionError):
    """A list of rules begins where its end cannot be found: nothing is written."""


def with_rule_lists(text: str, names: Sequence[str] = RULES.names) -> str:
    """`text` with each marked list of rules written from `names`, in the line endings
    `text` has. Raises UnreadableRuleList for a list whose end is not where it should be
    (a Markdown list without its end marker, a YAML one without its full stop)."""
    newline = "\r\n" if "\r\n" in text else "\n"
    markdown, written = _MARKDOWN.subn(lambda _: _lines(markdown_block(names), newline), text)
    if written != text.count(MARKDOWN_BEGIN):
        raise UnreadableRuleList(f"a list begins with {MARKDOWN_BEGIN} but has no {MARKDOWN_END}")
    result, written = _YAML.subn(lambda _: _lines(yaml_block(names), newline), markdown)
    if written != text.count(YAML_BEGIN):
        raise UnreadableRuleList(
            f"a list after {YAML_BEGIN!r} is not lines of rule names, the last ending with '.'"
        )
    return result


def _lines(block: str, newline: str) -> str:
    return block.replace("\n", newline)


def lists_rules(text: str) -> bool:
    return MARKDOWN_BEGIN in text or YAML_BEGIN in text


def rule_list_documents(root: Path) -> list[Path]:
    """The documents under `root` (the repository) that list the rules, in path order."""
    found = {path for pattern in DOCUMENT_GLOBS for path in root.glob(pattern)}
    return sorted(path for path in found if path.is_file() and lists_rules(_read(path)))


def _read(path: Path) -> str:
    return path.read_text("utf-8")
