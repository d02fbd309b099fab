"""Where the audit lists a kind, from how many the cluster holds (webhook.service.where_listed)."""

from __future__ import annotations

from webhook.service.where_listed import listed_where

NAMESPACES = tuple(f"team-{index}" for index in range(5))


def test_a_kind_the_cluster_holds_none_of_is_listed_nowhere() -> None:
    assert listed_where(0, NAMESPACES, page_size=100) == ()


def test_a_kind_with_fewer_pages_across_the_cluster_than_namespaces_is_listed_across_it() -> None:
    assert listed_where(1, NAMESPACES, page_size=100) is None
    assert listed_where(500, NAMESPACES, page_size=100) is None  # 5 pages, 5 namespaces


def test_a_kind_with_more_pages_across_the_cluster_than_namespaces_is_listed_per_namespace() -> (
    None
):
    assert listed_where(501, NAMESPACES, page_size=100) == NAMESPACES


def test_a_kind_whose_count_is_unknown_is_listed_per_namespace() -> None:
    assert listed_where(None, NAMESPACES, page_size=100) == NAMESPACES
