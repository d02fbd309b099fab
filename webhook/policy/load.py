"""Load a policy from YAML text or a file, reporting every problem with where it is.

`policy validate`, `serve`, the reloader, the policy ConfigMap's webhook and the
offline commands all load a policy here and make an engine of it (which refuses rule
names it does not have), so a policy that validates is exactly a policy that serves.

A policy is refused with one ``PolicyError`` carrying every problem found (the first
``MAX_PROBLEMS`` of them; the others counted), each with
the file, the line (and column) of the offending key or value, the field path and the
reason: YAML that does not parse (only that, then), each key given twice (with both
lines), each field the model refuses (in our words: ``webhook.policy.wording``), each
cross-reference that does not hold (``webhook.policy.references``; with `rule_names`,
the rules `enforcement` names too) and each contradiction between fields
(``webhook.policy.contradictions``).
A missing field is reported at the mapping that lacks it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Collection, Sequence
from pathlib import Path

import yaml
from pydantic import ValidationError

from webhook.errors import PolicyError, PolicyProblem
from webhook.policy.catalog import MigCatalog, default_catalog
from webhook.policy.compile import compile_policy
from webhook.policy.compiled import Policy
from webhook.policy.contradictions import contradiction_problems
from webhook.policy.model import PolicySpec
from webhook.policy.references import reference_problems
from webhook.policy.shipped import shipped_text
from webhook.policy.wording import worded
from webhook.policy.yaml_source import FieldPath, Position, YamlSource, read_source, yaml_problem

DEFAULT_POLICY = "default.yaml"

MAX_DEPTH = 32
"""The deepest nesting of mappings and lists a policy may have; its deepest field
(an exemption's pod label, a taint's effect) is five levels down."""
MAX_VALUES = 20_000
"""The most values a policy may hold, its aliases expanded: a policy of hundreds of pools
holds thousands; a few lines of aliases can stand for billions."""
REVISION_DIGITS = 12
"""Of the SHA-256 of a policy's text, what names its revision (``Policy.revision``)."""
MAX_PROBLEMS = 200
"""Most problems a ``PolicyError`` carries; the others are only counted. Nobody reads
thousands, and placing each at its line costs time while a webhook waits."""
KEY_LIMIT = 64
"""Most characters of a key a field path repeats: the key is there to be recognised."""
REASON_LIMIT = 1024
"""Longest reason of one problem, whatever of the policy it echoes."""


def load_policy_text(
    text: str,
    source: str,
    catalog: MigCatalog | None = None,
    rule_names: Collection[str] | None = None,
) -> Policy:
    """The compiled policy of `text`, named `source` in errors.

    `rule_names`, when given, are the rules `enforcement` may name (the engine's); their
    problems are then reported with the others, rather than by the engine alone.
    Raises PolicyError carrying every problem found."""
    catalog = catalog or default_catalog()
    try:
        read = read_source(text, max_depth=MAX_DEPTH, max_values=MAX_VALUES)
    except yaml.YAMLError as error:
        where, problem = yaml_problem(error)
        column = f" (column {where.column})" if where is not None else ""
        reason = _short(f"not valid YAML: {problem}{column}")
        raise PolicyError(source, "", reason, line=where.line if where else None) from error
    data = read.data
    if not isinstance(data, dict):
        raise PolicyError(
            source, "", "expected a mapping with apiVersion, kind, pools, classes", line=1
        )
    problems = _Problems(source, read)
    for duplicate in read.duplicates:
        problems.add(
            duplicate.path,
            f"duplicate key {_key(duplicate.path[-1])}: given at line {duplicate.first.line} "
            f"and again at line {duplicate.again.line}; YAML would keep only the last",
            duplicate.again,
        )
    spec: PolicySpec | None = None
    try:
        spec = PolicySpec.model_validate(data)
    except ValidationError as error:
        for found in error.errors():
            problems.add(*worded(found))
    for path, reason in reference_problems(data, catalog, rule_names):
        problems.add(path, reason)
    for path, reason in contradiction_problems(data):
        problems.add(path, reason)
    if problems.found or spec is None:
        raise PolicyError.of(problems.in_order(), problems.unlisted)
    revision = hashlib.sha256(text.encode("utf-8")).hexdigest()[:REVISION_DIGITS]
    return dataclasses.replace(compile_policy(spec, catalog, source), revision=revision)


def load_policy_file(
    path: Path, catalog: MigCatalog | None = None, rule_names: Collection[str] | None = None
) -> Policy:
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PolicyError(str(path), "", f"cannot read: {error}") from error
    return load_policy_text(text, str(path), catalog, rule_names)


def default_policy_text() -> str:
    return shipped_text(DEFAULT_POLICY)


def load_default_policy() -> Policy:
    return load_policy_text(default_policy_text(), f"policies/{DEFAULT_POLICY} (embedded)")


def format_location(location: Sequence[int | str]) -> str:
    """Turn pydantic's ('classes', 'training', 'pools', 0) into classes.training.pools[0];
    a very long key is cut short."""
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            key = part if len(part) <= KEY_LIMIT else f"{part[:KEY_LIMIT]}..."
            path += f".{key}" if path else key
    return path


class _Problems:
    """The problems of one policy text, each placed at its line."""

    def __init__(self, source: str, read: YamlSource) -> None:
        self.source = source
        self.read = read
        self.found: list[PolicyProblem] = []
        self.unlisted = 0

    def add(self, path: FieldPath, reason: str, where: Position | None = None) -> None:
        """Place the problem at its line; past ``MAX_PROBLEMS``, only count it."""
        if len(self.found) >= MAX_PROBLEMS:
            self.unlisted += 1
            return
        where = where or self.read.position(path)
        self.found.append(
            PolicyProblem(
                self.source,
                format_location(path),
                _short(reason),
                where.line if where else None,
                where.column if where else None,
            )
        )

    def in_order(self) -> list[PolicyProblem]:
        """By line, then in the order found (a stable sort)."""
        return sorted(self.found, key=lambda p: (p.line or 0, p.column or 0))


def _key(key: str | int) -> str:
    text = str(key)
    return repr(text if len(text) <= KEY_LIMIT else f"{text[:KEY_LIMIT]}...")


def _short(reason: str) -> str:
    if len(reason) <= REASON_LIMIT:
        return reason
    return f"{reason[:REASON_LIMIT]}... ({len(reason):,} characters)"
