"""Kubernetes quantities (webhook/engine/quantities.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from webhook.engine.quantities import format_count, parse_quantity


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1", Decimal(1)),
        (8, Decimal(8)),
        ("1000m", Decimal(1)),
        ("500m", Decimal("0.5")),
        ("2k", Decimal(2000)),
        ("1Ki", Decimal(1024)),
        ("1e3", Decimal(1000)),
        ("+3", Decimal(3)),
        ("-1", Decimal(-1)),
        (1.5, Decimal("1.5")),
        (".5", Decimal("0.5")),
    ],
)
def test_quantities_parse_to_exact_values(raw: str | int | float, expected: Decimal) -> None:
    assert parse_quantity(raw) == expected


@pytest.mark.parametrize("raw", ["", "two", "1 ", "1KB", "1.2.3", "e3", "--1", True])
def test_things_that_are_not_quantities_give_none(raw: str | bool) -> None:
    assert parse_quantity(raw) is None


@pytest.mark.parametrize(
    ("value", "shown"), [(Decimal("8.000"), "8"), (Decimal("8E+0"), "8"), (Decimal("0.50"), "0.5")]
)
def test_counts_are_shown_as_people_write_them(value: Decimal, shown: str) -> None:
    assert format_count(value) == shown
