"""Whether a label of some value other than a few meets a term's requirements on it."""

from __future__ import annotations

import pytest

from webhook.engine.open_values import OpenValues, parse_int64

LISTED = frozenset({"A100", "V100"})


def asked(*requirements: tuple[str, tuple[str, ...]]) -> OpenValues:
    values = OpenValues()
    for operator, given in requirements:
        values.add(operator, given)
    return values


@pytest.mark.parametrize(
    ("requirements", "met"),
    [
        ((), True),
        ((("Exists", ()),), True),
        ((("In", ("H100",)),), True),
        ((("In", ("A100",)),), False),
        ((("In", ("A100", "L4")),), True),
        ((("NotIn", ("A100", "H100")),), True),
        ((("In", ("H100",)), ("NotIn", ("H100",))), False),
        ((("In", ("H100", "L4")), ("In", ("L4",))), True),
        ((("DoesNotExist", ()),), False),
        ((("Gt", ("5",)),), True),
        ((("Gt", ("5",)), ("Lt", ("6",))), False),
        ((("Gt", ("5",)), ("Lt", ("7",)), ("NotIn", ("6",))), True),
        ((("Gt", ("five",)),), False),
        ((("In", ("8", "x")), ("Gt", ("7",))), True),
        ((("In", ("7", "x")), ("Gt", ("7",))), False),
        ((("Bogus", ()),), False),
    ],
)
def test_some_value_outside_the_listed_meets_the_requirements_or_none_does(
    requirements: tuple[tuple[str, tuple[str, ...]], ...], met: bool
) -> None:
    assert asked(*requirements).met_by_some(LISTED) is met


def test_a_copy_gathers_apart_from_its_original() -> None:
    original = asked(("NotIn", ("H100",)))
    copy = original.copy()
    copy.add("In", ("H100",))
    assert original.met_by_some(LISTED)
    assert not copy.met_by_some(LISTED)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("7", 7),
        ("007", 7),
        ("+7", 7),
        ("-7", -7),
        ("5_0", None),
        (" 7", None),
        ("7.0", None),
        ("9223372036854775808", None),
    ],
)
def test_integers_are_read_as_go_reads_them(text: str, number: int | None) -> None:
    assert parse_int64(text) == number
