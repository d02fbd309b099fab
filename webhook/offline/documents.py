"""Kubernetes objects read from multi-document YAML, each with the file and line it came from.

YAML is read as kube-apiserver reads it, as JSON (``webhook.policy.yaml_source``):
timestamps stay strings, a key given twice is an error. A
`kind: List` stands for its items. Anything that is not YAML, or a document
that is not an object, raises ManifestError naming the file and line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from webhook.policy.yaml_source import StrictLoader, yaml_problem

STDIN = "-"


class ManifestError(Exception):
    """A manifest that cannot be read, with the file and line of the problem."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True, slots=True)
class Document:
    """One Kubernetes object of a manifest."""

    source: str
    """The file name, or `-` for standard input."""
    line: int
    """The 1-based line where the object starts."""
    object: dict[str, Any]


def read_manifest_files(names: Sequence[str], stdin: TextIO) -> list[Document]:
    """Every object of the named files, in order; `-` reads standard input."""
    documents: list[Document] = []
    for name in names:
        if name == STDIN:
            text = stdin.read()
        else:
            try:
                text = Path(name).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise ManifestError(name, None, f"cannot read: {error}") from error
        documents += read_documents(text, name)
    return documents


def read_documents(text: str, source: str) -> list[Document]:
    """Every object of a multi-document YAML text; empty documents are left out."""
    loader = StrictLoader(text)
    documents: list[Document] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                break
            line = node.start_mark.line + 1
            documents += _objects(loader.construct_document(node), source, line)
    except yaml.YAMLError as error:
        raise _not_yaml(error, source) from error
    finally:
        loader.dispose()
    return documents


def read_yaml(text: str, source: str) -> Any:
    """The one YAML document of a text, read like a manifest (None when empty)."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise _not_yaml(error, source) from error


def _not_yaml(error: yaml.YAMLError, source: str) -> ManifestError:
    where, problem = yaml_problem(error)
    return ManifestError(source, where.line if where else None, f"not valid YAML: {problem}")


def _objects(data: Any, source: str, line: int) -> list[Document]:
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise ManifestError(source, line, "expected a Kubernetes object with apiVersion and kind")
    if data.get("kind") == "List" and isinstance(data.get("items"), list):
        return [item for entry in data["items"] for item in _objects(entry, source, line)]
    return [Document(source, line, data)]
