"""webhook.kube.frozen_views: a view made change by change is the view made whole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.kube.frozen_views import Copied, NameOrdered

NAMES = st.sampled_from([f"node-{index}" for index in range(12)] + ["a", "z", ""])
EVENTS = st.lists(st.tuples(NAMES, st.booleans()), max_size=60)


def sorted_view(store: dict[str, object]) -> tuple[object, ...]:
    return tuple(store[name] for name in sorted(store))


def same_objects(one: tuple[object, ...], other: tuple[object, ...]) -> bool:
    return len(one) == len(other) and all(a is b for a, b in zip(one, other, strict=True))


@given(first=st.sets(NAMES), events=EVENTS)
def test_name_ordered_followed_change_by_change_is_the_store_in_name_order(
    first: set[str], events: list[tuple[str, bool]]
) -> None:
    store: dict[str, object] = {name: object() for name in first}
    freezer: NameOrdered[object] = NameOrdered()
    before = freezer.whole(store).items
    assert same_objects(before, sorted_view(store))
    for name, kept in events:
        if kept:
            store[name] = object()
        else:
            store.pop(name, None)
        view = freezer.changed(store, name)
        assert same_objects(view.items, sorted_view(store))
        if view.since is not None:
            assert view.since is before
            assert len(before) == len(view.items)
            pairs = zip(before, view.items, strict=True)
            assert [i for i, (a, b) in enumerate(pairs) if a is not b] == [view.at]
        before = view.items


def test_a_changed_name_puts_the_new_facts_at_its_place_and_tells_where() -> None:
    store = {"b": "B", "a": "A", "c": "C"}
    freezer: NameOrdered[str] = NameOrdered()
    first = freezer.whole(store)
    assert first.items == ("A", "B", "C") and first.since is None
    store["b"] = "B2"
    view = freezer.changed(store, "b")
    assert view.items == ("A", "B2", "C")
    assert view.since is first.items and view.at == 1
    assert first.items == ("A", "B", "C"), "a view once published never changes"


def test_a_name_that_came_or_went_tells_no_position() -> None:
    freezer: NameOrdered[str] = NameOrdered()
    freezer.whole({"a": "A"})
    came = freezer.changed({"a": "A", "b": "B"}, "b")
    assert came.items == ("A", "B") and came.since is None
    went = freezer.changed({"b": "B"}, "a")
    assert went.items == ("B",) and went.since is None


def test_a_name_that_came_and_went_unseen_changes_nothing() -> None:
    freezer: NameOrdered[str] = NameOrdered()
    freezer.whole({"a": "A"})
    assert freezer.changed({"a": "A"}, "b").items == ("A",)


def test_whole_starts_again_from_the_store() -> None:
    freezer: NameOrdered[str] = NameOrdered()
    freezer.whole({"a": "A", "b": "B"})
    assert freezer.whole({"c": "C"}).items == ("C",)
    assert freezer.changed({"c": "C", "a": "A2"}, "a").items == ("A2", "C")


def test_copied_is_a_dict_of_its_own() -> None:
    store = {"high": 1}
    view = Copied[int]().changed(store, "high")
    store["low"] = 0
    assert view == {"high": 1}
