"""Build an RFC 6902 JSONPatch against the object exactly as received.

The received object is never changed. Where a mutation needs a mapping or a
list that is missing, the builder adds it with one `add` operation and keeps a
reference to the new value, so later additions beneath it go into that value
instead of becoming operations of their own. The patch is therefore minimal,
applies cleanly in order, and is empty when nothing changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def escape(key: str) -> str:
    """JSON-pointer escaping of one reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


class PatchBuilder:
    def __init__(self) -> None:
        self.operations: list[dict[str, Any]] = []
        self._created: set[int] = set()
        self._added: dict[tuple[int, str], Any] = {}

    def __bool__(self) -> bool:
        return bool(self.operations)

    def mapping(self, parent: Mapping[str, Any], parent_path: str, key: str) -> tuple[Any, str]:
        """The mapping at parent[key] and its path, added when missing or null."""
        value = self._added.get((id(parent), key), parent.get(key))
        if isinstance(value, dict):
            return value, f"{parent_path}/{escape(key)}"
        return self._put(parent, parent_path, key, {}), f"{parent_path}/{escape(key)}"

    def sequence(self, parent: Mapping[str, Any], parent_path: str, key: str) -> tuple[Any, str]:
        """The list at parent[key] and its path, added when missing or null."""
        value = self._added.get((id(parent), key), parent.get(key))
        if isinstance(value, list):
            return value, f"{parent_path}/{escape(key)}"
        return self._put(parent, parent_path, key, []), f"{parent_path}/{escape(key)}"

    def set(self, parent: Mapping[str, Any], parent_path: str, key: str, value: Any) -> None:
        """Set parent[key] to value, adding or replacing it."""
        if id(parent) in self._created:
            parent[key] = value  # type: ignore[index]
            return
        operation = "replace" if key in parent else "add"
        self.operations.append(
            {"op": operation, "path": f"{parent_path}/{escape(key)}", "value": value}
        )

    def append(self, items: Any, list_path: str, item: Any) -> None:
        if id(items) in self._created:
            items.append(item)
        else:
            self.operations.append({"op": "add", "path": f"{list_path}/-", "value": item})

    def _put(self, parent: Mapping[str, Any], parent_path: str, key: str, value: Any) -> Any:
        self._created.add(id(value))
        if id(parent) in self._created:
            parent[key] = value  # type: ignore[index]
        else:
            self._added[(id(parent), key)] = value
            self.operations.append(
                {"op": "add", "path": f"{parent_path}/{escape(key)}", "value": value}
            )
        return value
