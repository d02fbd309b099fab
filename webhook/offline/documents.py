"""Kubernetes objects read from multi-document YAML, each with the file and line it came from.

YAML is read as kube-apiserver reads it, as JSON (``webhook.policy.yaml_source``):
timestamps stay strings, a key given twice is an error. A
`kind: List` stands for its items. Anything that is not YAML, or a document
that is not an object, raises ManifestError naming the file and line. A folder
stands for the manifests under it, found as `kubectl apply -R -f DIR` finds them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml

from webhook.errors import GpuAdmissionError
from webhook.policy.yaml_source import StrictLoader, yaml_problem

STDIN = "-"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
"""What a file under a folder must end with to be read, as for kubectl."""
JSON_WHITESPACE = " \t\n\r"


class ManifestError(GpuAdmissionError):
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
    """Every object of the named files, in order; `-` reads standard input, a folder
    stands for its manifests (see `manifest_names`)."""
    documents: list[Document] = []
    for name in manifest_names(names):
        if name == STDIN:
            text = stdin.read()
        else:
            try:
                text = Path(name).read_text("utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise ManifestError(name, None, f"cannot read: {error}") from error
        reader = read_json_documents if name.endswith(".json") else read_documents
        documents += reader(text, name)
    return documents


@dataclass(frozen=True, slots=True)
class ManifestsRead:
    """What `read_each_manifest` made of some names: every file it tried, in order, the
    objects of those it could read, and the problem of each it could not."""

    sources: tuple[str, ...]
    documents: tuple[Document, ...]
    errors: tuple[ManifestError, ...]


def read_each_manifest(names: Sequence[str], stdin: TextIO) -> ManifestsRead:
    """Every object of the named files, as `read_manifest_files` reads them, but a file
    that cannot be read (missing, not YAML or JSON, a document that is not an object) or
    a folder without manifests is an error of its own and the others are still read:
    a report of `check` lists each broken file beside the objects of the others."""
    sources: list[str] = []
    documents: list[Document] = []
    errors: list[ManifestError] = []
    for name in names:
        try:
            expanded = manifest_names([name])
        except ManifestError as error:
            sources.append(name)
            errors.append(error)
            continue
        for source in expanded:
            sources.append(source)
            try:
                documents += _read_one(source, stdin)
            except ManifestError as error:
                errors.append(error)
    return ManifestsRead(tuple(sources), tuple(documents), tuple(errors))


def _read_one(name: str, stdin: TextIO) -> list[Document]:
    if name == STDIN:
        text = stdin.read()
    else:
        try:
            text = Path(name).read_text("utf-8")
        except FileNotFoundError:
            raise ManifestError(name, None, "no such file or folder") from None
        except IsADirectoryError:
            raise ManifestError(name, None, "a folder where a file was expected") from None
        except PermissionError:
            raise ManifestError(name, None, "cannot read: permission denied") from None
        except UnicodeDecodeError as error:
            raise ManifestError(
                name, None, f"cannot read: not UTF-8 text ({error.reason})"
            ) from None
        except OSError as error:
            raise ManifestError(name, None, f"cannot read: {error.strerror or error}") from None
    reader = read_json_documents if name.endswith(".json") else read_documents
    return reader(text, name)


def manifest_names(names: Sequence[str]) -> list[str]:
    """The named files, each folder replaced by the manifests under it (`folder_manifests`).

    Raises ManifestError for a folder without any."""
    expanded: list[str] = []
    for name in names:
        if name != STDIN and Path(name).is_dir():
            found = folder_manifests(Path(name))
            if not found:
                suffixes = ", ".join(f"*{suffix}" for suffix in MANIFEST_SUFFIXES)
                raise ManifestError(name, None, f"no manifests ({suffixes}) in this folder")
            expanded += [str(path) for path in found]
        else:
            expanded.append(name)
    return expanded


def folder_manifests(folder: Path) -> list[Path]:
    """The files ending in .yaml, .yml or .json under `folder` at any depth, in the order of
    their paths (a folder's files and subfolders by name, as kubectl walks them); hidden
    files and folders (`.git`, `.github`, ...) are left out, as are folders reached by links."""
    found: list[tuple[tuple[str, ...], Path]] = []
    for directory, subfolders, files in os.walk(folder):
        subfolders[:] = [name for name in subfolders if not name.startswith(".")]
        for name in files:
            path = Path(directory, name)
            if not name.startswith(".") and path.suffix in MANIFEST_SUFFIXES:
                found.append((path.relative_to(folder).parts, path))
    return [path for _, path in sorted(found)]


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


def read_json_documents(text: str, source: str) -> list[Document]:
    """Every object of a JSON text: one value, or several one after another (as kubectl
    reads a .json file); read as JSON, not as YAML, which refuses tabs that indent JSON."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)
    documents: list[Document] = []
    position = 0
    try:
        while True:
            while position < len(text) and text[position] in JSON_WHITESPACE:
                position += 1
            if position == len(text):
                return documents
            data, end = decoder.raw_decode(text, position)
            documents += _objects(data, source, text.count("\n", 0, position) + 1)
            position = end
    except json.JSONDecodeError as error:
        raise ManifestError(source, error.lineno, f"not valid JSON: {error.msg}") from error
    except _DuplicateKey as error:
        line = text.count("\n", 0, position) + 1
        raise ManifestError(source, line, f"not valid JSON: found duplicate key {error}") from None


class _DuplicateKey(GpuAdmissionError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(repr(key))
        data[key] = value
    return data


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
