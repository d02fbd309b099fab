"""The default policy with a few fragments replaced: how the policy tests write a broken
or contradictory policy, and find the line a problem should point at."""

from __future__ import annotations

from webhook.policy.load import default_policy_text


def edited(*replacements: tuple[str, str]) -> str:
    """The default policy's text with each (old, new) replaced once; old must be there."""
    text = default_policy_text()
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


def line_of(text: str, fragment: str, occurrence: int = 0) -> int:
    """The line number of the `occurrence`-th line holding `fragment`."""
    lines = [n for n, line in enumerate(text.splitlines(), start=1) if fragment in line]
    return lines[occurrence]
