"""Lists read as they arrive (webhook.kube.listing): one object held at a time, a cap on each.

The responses are urllib3's own, over the bytes kube-apiserver sends for a list (its
``metadata`` with the ``continue`` token, then ``items``), so the parser reads them as it
reads the real ones; tests/e2e/test_audit_bounds.py lists through a real kube-apiserver.
"""

from __future__ import annotations

import io
import tracemalloc
from typing import Any

import orjson
from urllib3 import HTTPResponse

from webhook.kube import listing
from webhook.kube.listing import MAX_OBJECT_SIZE, TooLarge


def replica_set(name: str, value: str = "v") -> dict[str, Any]:
    env = [{"name": "BLOB", "value": value}]
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", "labels": {"a.b/c": "d"}},
        "spec": {"replicas": 0, "template": {"spec": {"containers": [{"name": "m", "env": env}]}}},
    }  # fmt: skip


def response(
    items: list[dict[str, Any]], token: str = "", token_last: bool = False
) -> HTTPResponse:
    metadata = {"resourceVersion": "7", **({"continue": token} if token else {})}
    body = {"kind": "ReplicaSetList", "apiVersion": "apps/v1"}
    body |= {"items": items, "metadata": metadata} if token_last else {"metadata": metadata, "items": items}  # fmt: skip
    return HTTPResponse(body=io.BytesIO(orjson.dumps(body)), preload_content=False)


def stream(page: HTTPResponse, cap: int | None = MAX_OBJECT_SIZE) -> tuple[list[Any], str | None]:
    held = listing._PageStream(page)
    return list(listing._stream_objects(page, held, cap)), held.token


class TestOneObjectAtATime:
    def test_the_items_come_parsed_as_they_are(self) -> None:
        items = [replica_set("a"), replica_set("b"), {**replica_set("c"), "status": {"n": 1.5, "ok": True, "x": None}}]  # fmt: skip

        found, token = stream(response(items))

        assert found == items
        assert token is None

    def test_the_continue_token_is_read_before_or_after_the_items(self) -> None:
        assert stream(response([replica_set("a")], "next-page"))[1] == "next-page"
        assert stream(response([replica_set("a")], "next-page", token_last=True))[1] == "next-page"

    def test_a_key_named_like_the_token_inside_an_item_is_not_the_token(self) -> None:
        item = {"metadata": {"name": "x", "continue": "fake"}, "continue": "fake"}

        found, token = stream(response([item]))

        assert found == [item] and token is None

    def test_a_page_of_large_objects_is_never_held_whole(self) -> None:
        """Twenty ReplicaSets of a 1 MB value: read whole, the page would be 20 MB raw and as
        much again parsed; read as it arrives, one object at a time."""
        page = response([replica_set(f"r{i}", "x" * 1_000_000) for i in range(20)])

        tracemalloc.start()
        try:
            peak_before = tracemalloc.get_traced_memory()[1]
            names = [item["metadata"]["name"] for item in listing._stream_objects(page, listing._PageStream(page), MAX_OBJECT_SIZE)]  # fmt: skip
            peak = tracemalloc.get_traced_memory()[1] - peak_before
        finally:
            tracemalloc.stop()

        assert len(names) == 20
        assert peak < 4_000_000  # one object (1 MB), and what the parser buffers


class TestTheCapOnEachObject:
    def test_an_object_over_the_cap_comes_as_too_large_and_the_next_one_still_comes(self) -> None:
        items = [replica_set("small"), replica_set("huge", "x" * 50_000), replica_set("after")]

        found, _ = stream(response(items), cap=10_000)

        assert found[0] == items[0] and found[2] == items[2]
        too_large = found[1]
        assert isinstance(too_large, TooLarge)
        assert (too_large.namespace, too_large.name, too_large.uid) == ("ml", "huge", "uid-huge")
        assert too_large.size > 50_000 and too_large.cap == 10_000

    def test_the_size_of_an_object_is_the_same_however_it_is_read(self) -> None:
        big = replica_set("huge", "x" * 50_000)

        [alone], _ = stream(response([big]), cap=10_000)
        found, _ = stream(response([replica_set("a"), big, replica_set("b")]), cap=10_000)
        among = found[1]

        assert isinstance(alone, TooLarge) and isinstance(among, TooLarge)
        assert alone.size == among.size

    def test_an_identity_too_long_is_cut(self) -> None:
        item = replica_set("n" * 100_000)

        [found], _ = stream(response([item]), cap=1_000)

        assert isinstance(found, TooLarge)
        assert len(found.name) < 300 and found.name.endswith("(100,000 characters)")

    def test_without_a_cap_every_object_is_parsed(self) -> None:
        item = replica_set("huge", "x" * 50_000)

        assert stream(response([item]), cap=None)[0] == [item]


class TestPages:
    def test_every_page_is_followed_and_each_response_closed(self) -> None:
        pages = {None: response([replica_set("a"), replica_set("b")], "t1"), "t1": response([replica_set("c")])}  # fmt: skip
        asked: list[Any] = []

        def list_call(**options: Any) -> HTTPResponse:
            asked.append((options["limit"], options["_continue"]))
            return pages[options["_continue"]]

        names = [item["metadata"]["name"] for item in listing._objects(list_call, limit=2)]

        assert names == ["a", "b", "c"]
        assert asked == [(2, None), (2, "t1")]
        assert all(page.isclosed() for page in pages.values())

    def test_a_caller_that_stops_closes_the_response_and_asks_for_no_other_page(self) -> None:
        first = response([replica_set("a"), replica_set("b")], "t1")
        asked: list[Any] = []

        def list_call(**options: Any) -> HTTPResponse:
            asked.append(options["_continue"])
            return first

        objects = listing._objects(list_call)
        next(objects)
        objects.close()

        assert asked == [None]
        assert first.isclosed()


def counted(body: dict[str, Any]) -> int | None:
    return listing._counted(
        HTTPResponse(body=io.BytesIO(orjson.dumps(body)), preload_content=False)
    )


class TestTheCountOfAKind:
    def test_the_object_of_the_page_and_those_said_to_remain_are_counted(self) -> None:
        metadata = {"continue": "next", "remainingItemCount": 41}
        assert counted({"metadata": metadata, "items": [replica_set("a")]}) == 42
        assert counted({"items": [replica_set("a")], "metadata": metadata}) == 42

    def test_a_list_without_more_to_come_is_counted_by_its_items(self) -> None:
        assert counted({"metadata": {"resourceVersion": "7"}, "items": []}) == 0
        assert counted({"metadata": {}, "items": [replica_set("a"), replica_set("b")]}) == 2

    def test_more_to_come_without_a_count_is_unknown(self) -> None:
        assert counted({"metadata": {"continue": "next"}, "items": [replica_set("a")]}) is None

    def test_a_count_inside_an_item_is_not_the_lists(self) -> None:
        item = replica_set("a")
        item["metadata"]["remainingItemCount"] = 1000
        item["spec"]["items"] = [{"a": 1}, {"b": 2}]
        assert (
            counted({"metadata": {"continue": "x", "remainingItemCount": 2}, "items": [item]}) == 3
        )


class TestOneObjectRead:
    def test_an_object_read_by_name_is_parsed_under_the_same_cap(self) -> None:
        def body(item: dict[str, Any]) -> HTTPResponse:
            return HTTPResponse(body=io.BytesIO(orjson.dumps(item)), preload_content=False)

        small, huge = replica_set("small"), replica_set("huge", "x" * 50_000)

        assert listing._parse_one(body(small), 10_000) == small
        found = listing._parse_one(body(huge), 10_000)
        assert isinstance(found, TooLarge) and found.name == "huge"
        assert listing._parse_one(HTTPResponse(body=io.BytesIO(b"[1]"), preload_content=False), 10) is None  # fmt: skip
