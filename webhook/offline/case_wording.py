"""What is wrong with a `policy test` case file, at its line, in the project's words.

A case is read with a strict model (``cases.Case``); what the model refuses is said as
`policy validate` says a policy's problems (an unknown key with the key it most likely
means, a missing key, a value that is not one of the accepted ones), and a rule name
the engine does not have is refused with the names it has, instead of making the case
fail for a rule that can never fail.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_core import ErrorDetails

from webhook.policy.load import MAX_DEPTH, MAX_VALUES, format_location
from webhook.policy.yaml_source import FieldPath, read_source

__all__ = ["CaseProblem", "case_problem", "line_of", "unknown_name", "unknown_rules"]

CaseProblem = tuple[int | None, str]
"""The line of a problem (None when the text has none to point at) and the problem."""


def case_problem(error: ErrorDetails, model: type[BaseModel], text: str) -> CaseProblem:
    """The first of the model's refusals, at its line, in our words."""
    loc: FieldPath = tuple(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        keys = [field.alias or name for name, field in model.model_fields.items()]
        reason = f"unknown key {loc[-1]!r}{_nearest(str(loc[-1]), keys)}"
    elif kind == "missing":
        reason = f"missing required key {loc[-1]!r}"
    elif kind == "literal_error":
        accepted = (error.get("ctx") or {}).get("expected", "")
        reason = f"{_shown(error.get('input'))} is not accepted; write one of {accepted}"
    else:
        wanted = _WANTED.get(kind.split("_", 1)[0], "another value")
        reason = f"{_shown(error.get('input'))} is not {wanted}"
    where = format_location(loc)
    return line_of(text, loc), f"{where}: {reason}" if where else reason


def unknown_rules(rules: Sequence[str], known: Sequence[str], text: str) -> CaseProblem | None:
    """The first name of `rules` the engine does not have, at its line, or None."""
    for index, rule in enumerate(rules):
        if rule not in known:
            reason = (
                f"rules[{index}]: unknown rule {rule!r}{_nearest(rule, known)} "
                f"(rules: {', '.join(known)})"
            )
            return line_of(text, ("rules", index)), reason
    return None


def unknown_name(field: str, value: str, known: Sequence[str], what: str, text: str) -> CaseProblem:
    """`field` names `value`, which is not `what` (one of `known`): at the field's line."""
    listed = ", ".join(known) if known else "none"
    reason = f"{field}: {_shown(value)} is not {what}{_nearest(value, known)} ({listed})"
    return line_of(text, (field,)), reason


_WANTED = {
    "dict": "a mapping",
    "list": "a list",
    "string": "text",
    "model": "a mapping",
}


def _nearest(word: str, candidates: Iterable[str]) -> str:
    """The candidate `word` was meant to be: one that differs only in case first, else the
    closest regardless of case."""
    by_case = {candidate.casefold(): candidate for candidate in candidates}
    close = difflib.get_close_matches(word.casefold(), list(by_case), n=1, cutoff=0.6)
    return f"; did you mean {by_case[close[0]]!r}?" if close else ""


def _shown(value: Any) -> str:
    if isinstance(value, str):
        text = repr(value)
    else:  # flow style, on one line, without the end of a document a scalar gets
        text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...")
    return text if len(text) <= 60 else text[:57] + "..."


def line_of(text: str, loc: FieldPath) -> int | None:
    """The line of the key or value at `loc` in the case's text, when it can be found."""
    try:
        source = read_source(text, max_depth=MAX_DEPTH, max_values=MAX_VALUES)
    except yaml.YAMLError:
        return None
    position = source.position(loc)
    return position.line if position is not None else None
