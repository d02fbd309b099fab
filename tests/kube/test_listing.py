"""Listing a kind (webhook.kube.listing.list_kind) against stand-ins for the list calls;
tests/e2e/test_audit.py lists from a real kube-apiserver."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from kubernetes import client

from webhook.engine.templates import POD, TemplateKind
from webhook.kube.listing import list_kind

JOB = TemplateKind("batch", "Job", ("spec", "template"), "jobs")
"""A kind of a group listed through the generic calls."""


class Response:
    def __init__(self, body: dict[str, Any]) -> None:
        self.data = orjson.dumps(body)

    def release_conn(self) -> None:
        pass


class Lists:
    """Three objects in each namespace, served a `limit` at a time; records each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str | None]] = []

    def _page(self, call: str, namespace: str | None, **options: Any) -> Response:
        token = options.get("_continue")
        self.calls.append((call, namespace, token))
        start = int(token or 0)
        end = start + options["limit"]
        items = [{"metadata": {"name": f"o{i}", "namespace": namespace or "any"}} for i in range(3)]
        more = {"continue": str(end)} if end < len(items) else {}
        return Response({"items": items[start:end], "metadata": more})

    def list_pod_for_all_namespaces(self, **options: Any) -> Response:
        return self._page("pods", None, **options)

    def list_namespaced_pod(self, namespace: str, **options: Any) -> Response:
        return self._page("pods", namespace, **options)

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **options: Any) -> Response:  # fmt: skip
        return self._page(f"{group}/{version}/{plural}", None, **options)

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, **options: Any) -> Response:  # fmt: skip
        return self._page(f"{group}/{version}/{plural}", namespace, **options)


@pytest.fixture
def lists(monkeypatch: pytest.MonkeyPatch) -> Lists:
    stand_in = Lists()
    monkeypatch.setattr(client, "CoreV1Api", lambda api: stand_in)
    monkeypatch.setattr(client, "CustomObjectsApi", lambda api: stand_in)
    return stand_in


@pytest.mark.parametrize(("kind", "call"), [(POD, "pods"), (JOB, "batch/v1/jobs")])
def test_named_namespaces_are_listed_each_by_its_namespaced_call_page_by_page(
    lists: Lists, kind: TemplateKind, call: str
) -> None:
    progress: list[int] = []

    pages = list(
        list_kind(
            None, kind, "v1", namespaces=["ml", "team"], page_size=2,
            progress=lambda _, listed: progress.append(listed),
        )
    )  # fmt: skip

    assert lists.calls == [
        (call, "ml", None), (call, "ml", "2"), (call, "team", None), (call, "team", "2"),
    ]  # fmt: skip
    assert [len(page.items) for page in pages] == [2, 1, 2, 1]
    assert progress == [2, 3, 5, 6]  # counted across the namespaces
    assert {item["kind"] for page in pages for item in page.items} == {kind.kind}


def test_without_namespaces_the_kind_is_listed_across_the_cluster(lists: Lists) -> None:
    list(list_kind(None, POD, "v1", page_size=2))

    assert lists.calls == [("pods", None, None), ("pods", None, "2")]


def test_the_next_page_is_asked_for_only_when_the_last_is_taken(lists: Lists) -> None:
    pages = list_kind(None, POD, "v1", namespaces=["ml", "team"], page_size=2)

    next(pages)
    pages.close()

    assert lists.calls == [("pods", "ml", None)]
