"""Deep subset matching: does an object contain a fragment?

A mapping is contained when each of its keys is present with a contained
value; a list when each of its items is contained in some item of the other
list, in any order; anything else when it is equal (with true never equal to 1).
"""

from __future__ import annotations

import json
from typing import Any


def mismatch(fragment: Any, actual: Any, path: str = "") -> str | None:
    """None when `fragment` is contained in `actual`; else where and how they differ."""
    where = path or "the object"
    if isinstance(fragment, dict):
        if not isinstance(actual, dict):
            return f"{where}: expected a mapping, found {_show(actual)}"
        for key, value in fragment.items():
            here = f"{path}.{key}" if path else str(key)
            if key not in actual:
                return f"{here}: missing"
            problem = mismatch(value, actual[key], here)
            if problem is not None:
                return problem
        return None
    if isinstance(fragment, list):
        if not isinstance(actual, list):
            return f"{where}: expected a list, found {_show(actual)}"
        for index, item in enumerate(fragment):
            if all(mismatch(item, candidate) is not None for candidate in actual):
                return f"{path}[{index}]: no item contains {_show(item)}"
        return None
    if fragment != actual or isinstance(fragment, bool) != isinstance(actual, bool):
        return f"{where}: expected {_show(fragment)}, found {_show(actual)}"
    return None


def _show(value: Any) -> str:
    return json.dumps(value, default=str)
