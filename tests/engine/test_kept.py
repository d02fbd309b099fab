"""A bounded table of answers for one view of the cluster (webhook/engine/kept.py)."""

from __future__ import annotations

from webhook.engine.kept import KeptAnswers, NothingKept


def counted(calls: list[int], answer: int) -> int:
    calls.append(answer)
    return answer


def test_an_answer_is_worked_out_once_per_key_and_view() -> None:
    kept: KeptAnswers[int] = KeptAnswers(8)
    view, calls = object(), []
    for _ in range(3):
        assert kept.get(b"k", view, lambda: counted(calls, 7)) == 7
    assert calls == [7]
    assert kept.peek(b"k", view) == 7
    assert kept.peek(b"other", view) is None


def test_another_view_starts_the_table_over() -> None:
    kept: KeptAnswers[str] = KeptAnswers(8)
    before, after = object(), object()
    kept.get(b"k", before, lambda: "before")
    assert kept.peek(b"k", after) is None
    assert kept.get(b"k", after, lambda: "after") == "after"
    assert kept.peek(b"k", before) is None


def test_a_full_table_starts_over_and_never_holds_more_than_its_bound() -> None:
    kept: KeptAnswers[int] = KeptAnswers(3)
    view = object()
    for index in range(10):
        kept.get(str(index).encode(), view, lambda index=index: index)
        assert len(kept) <= 3


def test_nothing_kept_works_every_answer_out() -> None:
    kept: NothingKept[int] = NothingKept()
    view, calls = object(), []
    for _ in range(2):
        kept.get(b"k", view, lambda: counted(calls, 1))
    assert calls == [1, 1]
    assert kept.peek(b"k", view) is None
    assert len(kept) == 0
