"""Pydantic's refusals of a policy, said in the project's words.

pydantic reports an error type, a location and its own sentence ("Extra inputs are not
permitted"); an operator should read what is wrong with the key they wrote and what
would be accepted. ``worded`` turns each error into a field path and such a reason: an
unknown key with the key it most resembles at that level, a missing key by name, a
value of the wrong type with the type wanted and the value given (``8.0 is not a whole
number; write 8``), a pattern by what it means. Nothing of pydantic's wording reaches a
user: an error type not known here still gets a sentence of our own.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from webhook.policy import model
from webhook.policy.yaml_source import FieldPath

KEY_IN_MAPPING = "[key]"
"""The last part of pydantic's location of a mapping's key (not its value)."""
KEYS_LISTED = 12
"""Most keys an unknown key's reason lists when none resembles it."""

PATTERNS = {
    model.LABEL_KEY_PATTERN: (
        "a label key: a name of letters, digits, '-', '_' and '.' starting and ending with "
        "a letter or digit, after an optional DNS prefix and '/' (example.com/name)"
    ),
    model.LABEL_VALUE_PATTERN: (
        "a label value: letters, digits, '-', '_' and '.', starting and ending with a "
        "letter or digit, or nothing"
    ),
    model.NAME_PATTERN: (
        "a name of lower-case letters, digits and '-', starting and ending with a letter or digit"
    ),
    model.DNS_SUBDOMAIN_PATTERN: "a DNS name of lower-case letters, digits, '-' and '.'",
    model.KIND_PATTERN: "a kind: a capital letter, then letters and digits (PyTorchJob)",
    model.DEVICE_ATTRIBUTE_PATTERN: (
        "a device attribute: an identifier of at most 32 characters, after an optional "
        "DNS domain and '/' (productName, example.com/productName)"
    ),
}
"""What each of the model's patterns means, as the reason says it."""


def worded(error: ErrorDetails) -> tuple[FieldPath, str]:
    """The field path and the reason of one of pydantic's errors, in our words."""
    loc: FieldPath = tuple(error["loc"])
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if len(loc) >= 2 and loc[-1] == KEY_IN_MAPPING:
        # The key as a key of the path, not as a list index.
        return (*loc[:-2], str(loc[-2])), f"key {_shown(value)} is not text; quote it"
    if kind == "extra_forbidden":
        return loc, _unknown_key(loc)
    if kind == "missing":
        return loc, f"missing required key {loc[-1]!r}" if loc else "missing"
    return loc, _reason(kind, value, ctx)


def _reason(kind: str, value: Any, ctx: dict[str, Any]) -> str:
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return _not_whole(value)
    if kind in ("bool_type", "bool_parsing"):
        return _not_boolean(value)
    if kind == "string_type":
        return f"expected text, not {_kind_of(value)}" + (
            f'; quote it: "{_yaml(value)}"' if _is_scalar(value) else ""
        )
    if kind == "literal_error":
        # YAML 1.1 reads yes, no, on and off as booleans.
        quote = "; quote it if you meant the word" if isinstance(value, bool) else ""
        return f"must be {ctx.get('expected', 'another value')}, not {_shown(value)}{quote}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        meaning = PATTERNS.get(pattern, f"text matching {pattern}")
        return f"{_shown(value)} is not {meaning}"
    if kind in ("string_too_short", "too_short"):
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"needs at least {least} items"
    if kind == "string_too_long":
        return f"is {len(value)} characters long; at most {ctx.get('max_length')}"
    if kind == "too_long":
        return f"has {ctx.get('actual_length')} items; at most {ctx.get('max_length')}"
    bound = _bound(kind, value, ctx)
    if bound is not None:
        return bound
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping of keys, not {_kind_of(value)}"
    if kind == "list_type":
        return f"expected a list, not {_kind_of(value)}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return f"{_shown(value)} is not accepted here"


BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def _bound(kind: str, value: Any, ctx: dict[str, Any]) -> str | None:
    if kind not in BOUNDS:
        return None
    key, words = BOUNDS[kind]
    return f"{_shown(value)} is out of range; write {words} {ctx.get(key)}"


def _not_whole(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value!r} is not a whole number; write {int(value)}"
    if isinstance(value, str) and _parses_as_int(value):
        return f"{value!r} is text, not a whole number; write {int(value)} without quotes"
    return f"expected a whole number, not {_kind_of(value)}"


def _not_boolean(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        written = value.strip().lower()
        return f"{value!r} is text, not true or false; write {written} without quotes"
    return f"expected true or false, not {_kind_of(value)}"


def _unknown_key(loc: FieldPath) -> str:
    key, parent = loc[-1], loc[:-1]
    where = f" in {_path(parent)}" if parent else ""
    known = _keys_at(parent)
    close = difflib.get_close_matches(str(key), known, n=1)
    if close:
        return f"unknown key {str(key)!r}{where}; did you mean {close[0]!r}?"
    listed = ", ".join(known[:KEYS_LISTED]) + (", ..." if len(known) > KEYS_LISTED else "")
    return f"unknown key {str(key)!r}{where}; keys: {listed}" if known else f"unknown key {key!r}"


def _keys_at(path: FieldPath) -> list[str]:
    """The keys the model allows in the mapping at `path` (as written, camelCase)."""
    found = _model_at(path)
    if found is None:
        return []
    return [field.alias or name for name, field in found.model_fields.items()]


def _model_at(path: FieldPath) -> type[BaseModel] | None:
    """The model of the mapping at `path`, following fields, mapping values and list items."""
    annotation: Any = model.PolicySpec
    for part in path:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    return _model_of(annotation)


def _step(annotation: Any, part: str | int) -> Any:
    found = _model_of(annotation)
    if found is not None:
        fields = {field.alias or name: field for name, field in found.model_fields.items()}
        field = fields.get(str(part))
        return field.annotation if field is not None else None
    for arg in _members(annotation):
        origin = typing.get_origin(arg)
        if origin is dict:
            return typing.get_args(arg)[1]
        if origin is list and isinstance(part, int):
            return typing.get_args(arg)[0]
    return None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for arg in _members(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _members(annotation: Any) -> Iterable[Any]:
    """The types of a union (`X | None`), or the one type."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return typing.get_args(annotation)
    return (annotation,)


def _path(path: FieldPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _parses_as_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float)) or value is None


def _yaml(value: Any) -> str:
    """A scalar as YAML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _shown(value: Any) -> str:
    """A value as the reason shows it: text quoted, scalars as YAML writes them."""
    if isinstance(value, str):
        return repr(value)
    if _is_scalar(value):
        return _yaml(value)
    return _kind_of(value)


def _kind_of(value: Any) -> str:
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, bool):
        return f"the boolean {_yaml(value)}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if value is None:
        return "null (nothing)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"
