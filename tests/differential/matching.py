"""The matching oracle's client: which webhooks kube-apiserver would call for a request.

Given the webhook configurations as ``webhook.install.configurations`` renders them, the
oracle answers each admission request with, per webhook, whether its rules and its
objectSelector match and what its matchConditions make of it, by kube-apiserver's own
matching code and CEL environment (tests/differential/matching/main.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tests.differential.oracle import Json, OracleFailed, OracleProcess


@dataclass(frozen=True, slots=True)
class Matched:
    """What kube-apiserver makes of one request for one webhook."""

    name: str
    rules: bool
    selector: bool
    conditions: Literal["true", "false", "error"]
    failed: str = ""
    """The condition that was false."""
    error: str = ""

    @property
    def called(self) -> bool:
        return self.rules and self.selector and self.conditions == "true"

    @classmethod
    def of(cls, answer: Mapping[str, Any]) -> Matched:
        return cls(
            answer["name"],
            answer["rules"],
            answer["selector"],
            answer["conditions"],
            answer.get("failed", ""),
            answer.get("error", ""),
        )


class MatchingOracle(OracleProcess):
    def configure(self, configurations: Sequence[Json]) -> int:
        """Ask of these configurations from now on; how many webhooks they hold."""
        (answer,) = self.ask([{"configurations": list(configurations)}])
        return int(answer["webhooks"])

    def matched(self, requests: Sequence[Json]) -> list[dict[str, Matched]]:
        """For each AdmissionRequest (as a review carries it), each webhook by name."""
        answers = self.ask([{"request": request} for request in requests])
        found = []
        for request, answer in zip(requests, answers, strict=True):
            if not isinstance(answer.get("webhooks"), list):
                raise OracleFailed(f"the oracle could not answer for {request!r}: {answer!r}")
            found.append({m.name: m for m in map(Matched.of, answer["webhooks"])})
        return found
