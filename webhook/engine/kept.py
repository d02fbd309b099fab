"""A bounded table of answers worked out for one view of the cluster.

The engine keeps some answers by the JSON text of what they depend on
(``webhook.engine.pod_answers``, ``webhook.engine.placement_answers``). Each table
holds at most ``max_answers`` and starts over when full, so a tenant sending something
new each time only fills it; and it starts over when the view it was worked out for
(the capacity now, the GPU nodes outside the policy's kinds) is another object, so an
answer is never handed out for a cluster it was not worked out for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class KeptAnswers(Generic[T]):
    """Answers by key, for one view of the cluster at a time."""

    def __init__(self, max_answers: int) -> None:
        self.max_answers = max_answers
        self._table: tuple[object, dict[bytes, T]] = (None, {})

    def get(self, key: bytes, view: object, work_out: Callable[[], T]) -> T:
        """The answer kept for `key` under `view`, worked out (and kept) when there is none."""
        seen, answers = self._table
        if seen is not view:
            answers = {}
            self._table = (view, answers)
        found = answers.get(key)
        if found is None:
            found = work_out()
            if len(answers) >= self.max_answers:
                answers.clear()
            answers[key] = found
        return found

    def peek(self, key: bytes, view: object) -> T | None:
        """The answer kept for `key` under `view`, or None."""
        seen, answers = self._table
        return answers.get(key) if seen is view else None

    def __len__(self) -> int:
        return len(self._table[1])


class NothingKept(KeptAnswers[T]):
    """Keeps nothing: every answer is worked out afresh (what a first pod costs)."""

    def __init__(self) -> None:
        super().__init__(0)

    def get(self, key: bytes, view: object, work_out: Callable[[], T]) -> T:
        return work_out()

    def peek(self, key: bytes, view: object) -> T | None:
        return None


def same_objects(first: Sequence[object], second: Sequence[object]) -> bool:
    """Whether two sequences hold the very same objects in the same order: what a view
    kept from the last inventory is still good for, where equality would cost a read of
    every object."""
    return len(first) == len(second) and all(a is b for a, b in zip(first, second, strict=True))
