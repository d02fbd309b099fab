"""The files shipped in `webhook/policies/`: the default policies, the MIG catalog, the schema.

They are data, not code, and every reader goes through here so that where they live is
written once.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

FOLDER = "policies"


def shipped_file(name: str) -> Traversable:
    return resources.files("webhook").joinpath(FOLDER, name)


def shipped_text(name: str) -> str:
    return shipped_file(name).read_text("utf-8")
