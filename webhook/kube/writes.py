"""Writing objects someone else may write at the same moment: the wing's one conflict strategy.

Every write reads the object first and writes back on top of what it read: a
replacement carries the ``resourceVersion`` read, so kube-apiserver refuses it with
409 Conflict if another writer came in between, and a create of an object read as
missing is refused with 409 AlreadyExists if it appeared meanwhile. Either way
nothing is overwritten unseen: ``retry_on_conflict`` runs the whole read and write
again on fresh data, up to ``ATTEMPTS`` times, and passes any other error (or a
conflict on the last attempt) to the caller. Two rotations running at once, or an
install next to a rotation, therefore take turns.

Objects are read as raw JSON (``read_json``) and written back as plain dicts, so
base64 values (Secret data, ``caBundle``) pass through exactly as kube-apiserver
stores them, whatever the generated models make of ``bytes`` fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from webhook.kube.api_errors import CONFLICT, NOT_FOUND, ApiException

__all__ = ["ATTEMPTS", "create_or_replace", "read_json", "retry_on_conflict"]

ATTEMPTS = 3

T = TypeVar("T")


def retry_on_conflict(write: Callable[[], T]) -> T:
    """Run ``write`` (a read and a write) again while kube-apiserver answers 409."""
    for attempt in range(ATTEMPTS):
        try:
            return write()
        except ApiException as error:
            if error.status != CONFLICT or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def read_json(read: Callable[..., Any], *args: str) -> dict[str, Any] | None:
    """The object as kube-apiserver sent it, or None if it does not exist."""
    try:
        response = read(*args, _preload_content=False)
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    document: dict[str, Any] = json.loads(response.data)
    return document


def create_or_replace(
    body: dict[str, Any],
    *,
    read: Callable[..., Any],
    create: Callable[..., Any],
    replace: Callable[..., Any],
) -> None:
    """Make the cluster-scoped object named in ``body`` be ``body``, whole: created when
    missing, otherwise replaced on top of the version read."""
    name = body["metadata"]["name"]

    def write() -> None:
        current = read_json(read, name)
        if current is None:
            create(body)
            return
        metadata = dict(body["metadata"], resourceVersion=current["metadata"]["resourceVersion"])
        replace(name, dict(body, metadata=metadata))

    retry_on_conflict(write)
