"""YAML read as kube-apiserver reads it, and where in the text each key is.

Kubernetes reads YAML as JSON: timestamps stay strings, and a key given twice in one
mapping is an error (kubectl's strict validation), not a silent overwrite. Manifests
(``webhook.offline.documents``) and policies (``webhook.policy.load``) are read with
the one loader below. A policy is also read node by node (``read_source``): each key
and list item gets its line and column, so that an error names where the offending
key is; every key given twice is found, with both lines, not only the first; and a
policy that nests too deep or, its aliases expanded, holds too many values is refused
before anything walks it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from webhook.errors import GpuAdmissionError

MERGE_TAG = "tag:yaml.org,2002:merge"

FieldPath = tuple[str | int, ...]
"""Keys and list indices from the document's root: ('classes', 'training', 'pools', 0)."""


@dataclass(frozen=True, slots=True)
class Position:
    line: int
    """1-based."""
    column: int
    """1-based."""


def position_of(mark: yaml.Mark) -> Position:
    return Position(mark.line + 1, mark.column + 1)


class StrictLoader(yaml.SafeLoader):
    """A safe loader that keeps timestamps as the strings Kubernetes sees, and refuses a
    key given twice in one mapping (``refuse_duplicates``) and, when ``max_depth`` is set,
    mappings and lists nested deeper than that (PyYAML composes a node by recursion: an
    unbounded depth would end in RecursionError, not in an error naming the line)."""

    refuse_duplicates = True
    max_depth: int | None = None

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self.max_depth is not None and self._depth > self.max_depth:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise ComposerError(
                    None,
                    None,
                    f"nests deeper than {self.max_depth} levels of mappings and lists",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if self.refuse_duplicates:
            seen: set[str] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                    continue
                if key_node.value in seen:
                    raise ConstructorError(
                        "while reading a mapping",
                        node.start_mark,
                        f"found duplicate key {key_node.value!r}",
                        key_node.start_mark,
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def _timestamp_as_text(loader: StrictLoader, node: yaml.Node) -> str:
    return str(node.value)


StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def yaml_problem(error: yaml.YAMLError) -> tuple[Position | None, str]:
    """Where a YAML error is (when known) and what it says."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        return (position_of(mark) if mark is not None else None), str(error.problem or error)
    return None, str(error)


class _SourceLoader(StrictLoader):
    """Keys given twice are found by ``read_source``, all of them, not raised at the first.

    Composing stops once it has made more than ``max_values`` nodes (an alias, which
    stands for at least one value, counted as one): a long document is refused after
    reading as much of it as a document of the limit, not all of it."""

    refuse_duplicates = False
    max_values: int | None = None
    _composed = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._composed += 1
        if self.max_values is not None and self._composed > self.max_values:
            raise TooLarge(
                f"holds more than {self.max_values:,} values; at most {self.max_values:,}"
            )
        return super().compose_node(parent, index)


@dataclass(frozen=True, slots=True)
class DuplicateKey:
    path: FieldPath
    """The path of the key given twice."""
    first: Position
    again: Position
    """Where it is given again: YAML keeps this one's value."""


@dataclass(frozen=True, slots=True)
class YamlSource:
    """One YAML document: its data and where each of its keys and list items is."""

    data: Any
    positions: Mapping[FieldPath, Position]
    """Of each mapping key (its last occurrence) and each list item."""
    duplicates: tuple[DuplicateKey, ...]

    def position(self, path: FieldPath) -> Position | None:
        """Where `path` is, or its nearest ancestor that is in the text (a missing field
        is reported at the mapping that lacks it)."""
        for end in range(len(path), 0, -1):
            found = self.positions.get(path[:end])
            if found is not None:
                return found
        return self.positions.get(())


class TooLarge(GpuAdmissionError, yaml.YAMLError):
    """A document whose aliases expand it past the values it may hold (an alias inside
    what it stands for never ends)."""


def read_source(text: str, *, max_depth: int, max_values: int) -> YamlSource:
    """The one document of `text` (data None when it is empty), read with ``StrictLoader``
    except that keys given twice are collected, not refused.

    Raises yaml.YAMLError: not YAML, more than one document, nested deeper than
    `max_depth`, or (``TooLarge``) more than `max_values` values once aliases are
    expanded (each alias is checked as what it stands for would be).
    """
    loader = _SourceLoader(text)
    loader.max_depth = max_depth
    loader.max_values = max_values
    try:
        node = loader.get_single_node()
        if node is None:
            return YamlSource(None, {(): Position(1, 1)}, ())
        walk = _Walk()
        values = walk.node(node, ())
        if values > max_values:
            raise TooLarge(
                f"holds {values:,} values with its aliases expanded; at most {max_values:,}"
            )
        data = loader.construct_document(node)
    finally:
        loader.dispose()
    return YamlSource(data, walk.positions, tuple(walk.duplicates))


IN_PROGRESS = -1


class _Walk:
    """Positions and duplicate keys of a node graph, and the number of values it expands to.
    An alias is not walked again (its positions are those of its anchor), only counted."""

    def __init__(self) -> None:
        self.positions: dict[FieldPath, Position] = {}
        self.duplicates: list[DuplicateKey] = []
        self._values: dict[int, int] = {}

    def node(self, node: yaml.Node, path: FieldPath) -> int:
        counted = self._values.get(id(node))
        if counted is not None:
            if counted == IN_PROGRESS:
                raise TooLarge(f"an alias at line {node.start_mark.line + 1} contains itself")
            return counted
        self._values[id(node)] = IN_PROGRESS
        if not path:
            self.positions[()] = position_of(node.start_mark)
        values = 1
        if isinstance(node, yaml.MappingNode):
            first: dict[str, Position] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    values += self.node(key_node, path) + self.node(value_node, path)
                    continue
                if key_node.tag == MERGE_TAG:  # its keys become this mapping's
                    values += self.node(value_node, path)
                    continue
                key: str = key_node.value
                where = position_of(key_node.start_mark)
                if key in first:
                    self.duplicates.append(DuplicateKey((*path, key), first[key], where))
                else:
                    first[key] = where
                self.positions[(*path, key)] = where
                values += 1 + self.node(value_node, (*path, key))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self.positions.setdefault((*path, index), position_of(item.start_mark))
                values += self.node(item, (*path, index))
        self._values[id(node)] = values
        return values
