"""Whether some value of a node label, other than a few, meets a term's requirements on it.

A kind of node such as "a training node of a GPU model the policy does not list" has the
model label with a value that is none of the listed ones, but could be any other. A term
of a pod's required node affinity (with its nodeSelector) matches such a node when one
value meets every requirement of the term on that label: `In [H100]` does, `NotIn [A100]`
does, `In [A100]` with only A100 listed does not, nor do `In [H100]` and `NotIn [H100]`
together. ``OpenValues`` gathers a term's requirements on one label and answers that.

Integers are read as kube-apiserver reads them for `Gt` and `Lt` (Go's
``strconv.ParseInt(value, 10, 64)``); an integer has endless spellings (`7`, `07`,
`007`), so a range with an integer in it always holds a value no requirement names.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """The integer Go's ``strconv.ParseInt(text, 10, 64)`` reads, or None where it fails."""
    if not _DECIMAL.fullmatch(text):
        return None
    number = int(text)
    return number if INT64_MIN <= number <= INT64_MAX else None


@dataclass(slots=True)
class OpenValues:
    """The requirements of one term on one label."""

    within: set[str] | None = None
    """The values `In` requirements allow (the intersection of theirs); None without one."""
    outside: set[str] = field(default_factory=set)
    """The values `NotIn` requirements forbid."""
    above: int | None = None
    """The value must be an integer above this (`Gt`)."""
    below: int | None = None
    """The value must be an integer below this (`Lt`)."""
    never: bool = False
    """A requirement no value meets: `DoesNotExist`, an unreadable bound, an unknown operator."""

    def add(self, operator: str, values: Collection[str]) -> None:
        if operator == "In":
            wanted = set(values)
            self.within = wanted if self.within is None else self.within & wanted
        elif operator == "NotIn":
            self.outside.update(values)
        elif operator in ("Gt", "Lt"):
            bound = parse_int64(next(iter(values), ""))
            if bound is None:
                self.never = True
            elif operator == "Gt":
                self.above = bound if self.above is None else max(self.above, bound)
            else:
                self.below = bound if self.below is None else min(self.below, bound)
        elif operator != "Exists":
            self.never = True  # DoesNotExist, or an operator kube-apiserver refuses

    def copy(self) -> OpenValues:
        within = None if self.within is None else set(self.within)
        return OpenValues(within, set(self.outside), self.above, self.below, self.never)

    def met_by_some(self, excluded: frozenset[str]) -> bool:
        """Whether a value not in `excluded` meets every requirement gathered."""
        if self.never:
            return False
        if self.within is not None:
            return any(
                value not in excluded and value not in self.outside and self._in_range(value)
                for value in self.within
            )
        if self.above is None and self.below is None:
            return True  # endless strings, and only finitely many are excluded
        low = INT64_MIN if self.above is None else self.above + 1
        high = INT64_MAX if self.below is None else self.below - 1
        return low <= high

    def _in_range(self, value: str) -> bool:
        if self.above is None and self.below is None:
            return True
        number = parse_int64(value)
        if number is None:
            return False
        return (self.above is None or number > self.above) and (
            self.below is None or number < self.below
        )
