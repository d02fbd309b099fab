"""Kubernetes resource quantities ("1", "500m", "2Ki", "1e3") as exact decimals."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_SMALL_INTEGERS = {str(n): Decimal(n) for n in range(0, 129)}


# Kubernetes quantities are bounded (int64 with a scale); far beyond that a
# value is a typo, and exact arithmetic on it would only waste time.
_LARGEST_EXPONENT = 30


def parse_quantity(raw: str | int | float) -> Decimal | None:
    """The value of a quantity, or None when it is not a quantity at all."""
    value = _parse(raw)
    if value is None or not value.is_finite() or abs(value.adjusted()) > _LARGEST_EXPONENT:
        return None
    return value


def _parse(raw: str | int | float) -> Decimal | None:
    if isinstance(raw, str):
        known = _SMALL_INTEGERS.get(raw)
        if known is not None:
            return known
        match = _QUANTITY.fullmatch(raw)
        if match is None:
            return None
        number, suffix = match.group(1), match.group(2) or ""
        if len(number) > _LARGEST_EXPONENT:
            return None  # before any arithmetic: a million digits would overflow Decimal
        try:
            if suffix in _SUFFIXES:  # "1E" is exa; "1E3" is an exponent
                return Decimal(number) * _SUFFIXES[suffix]
            return Decimal(number + suffix)
        except InvalidOperation:
            return None
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return Decimal(raw)
    try:
        return Decimal(str(raw))
    except InvalidOperation:
        return None


def format_count(value: Decimal) -> str:
    """A count as people write it: 8, not 8.000 or 8E+0."""
    normalised = value.normalize()
    if normalised == normalised.to_integral_value():
        return str(int(normalised))
    return format(normalised, "f")
