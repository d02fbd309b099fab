"""Rule: GPU quantities are whole, non-negative, and requests equal limits.

GPUs cannot be overcommitted or shared by quantity: kube-apiserver itself
refuses fractions and unequal values for extended resources, but only after
our mutation; saying so here names the container and the fix.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from webhook.engine.decision import Violation, echo, shorten
from webhook.engine.quantities import format_count, parse_quantity
from webhook.engine.rules.context import RuleContext

RULE = "gpu-quantity"


def check_quantities(context: RuleContext) -> list[Violation]:
    violations = []
    for container in context.pod.runnable_containers():
        for quantity in container.gpu:
            if quantity.request == quantity.limit and _whole(quantity.value):
                continue  # what defaulting leaves, judged without parsing either again
            where = f"{container.describe} {shorten(quantity.resource)}"
            problems = [
                problem
                for kind, raw in (("request", quantity.request), ("limit", quantity.limit))
                if raw is not None and (problem := _problem(kind, raw)) is not None
            ]
            if problems:
                violations.append(Violation(RULE, f"{where}: {'; '.join(problems)}"))
                continue
            if quantity.limit is None:
                violations.append(
                    Violation(
                        RULE,
                        f"{where}: a request of {_shown(quantity.request)} without a limit; "
                        f"set the limit to the same value",
                    )
                )
            elif quantity.request is not None and parse_quantity(
                quantity.request
            ) != parse_quantity(quantity.limit):
                violations.append(
                    Violation(
                        RULE,
                        f"{where}: requests {_shown(quantity.request)} but limits "
                        f"{_shown(quantity.limit)}; "
                        f"GPUs cannot be overcommitted, make requests equal limits",
                    )
                )
    return violations


def _problem(kind: str, raw: Any) -> str | None:
    value = parse_quantity(raw)
    if value is None:
        return f"{kind} {echo(raw)} is not a quantity; use a whole number such as 1"
    if value < 0:
        return f"{kind} {_shown(raw)} is negative"
    if value != value.to_integral_value():
        return (
            f"{kind} {format_count(value)} is not a whole number; GPUs are whole devices "
            "(use a MIG slice such as nvidia.com/mig-1g.5gb for a fraction of one)"
        )
    return None


def _whole(value: Decimal | None) -> bool:
    """Whether a quantity's value is a whole, non-negative number: one without a problem."""
    return value is not None and value >= 0 and value == value.to_integral_value()


def _shown(raw: Any) -> str:
    """A quantity as written (unquoted), shortened: `1`, `500m`."""
    return shorten(str(raw))
