"""`serve --audit-interval` (webhook.cli.audit_options)."""

from __future__ import annotations

import argparse

import pytest

from webhook.cli.audit_options import add_audit_interval_option, audit_interval


def parsed(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_audit_interval_option(parser)
    return parser.parse_args(args)


@pytest.mark.parametrize(
    ("given", "seconds"), [("600", 600.0), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0), ("1.5h", 5400.0)]
)  # fmt: skip
def test_a_duration_is_seconds_or_a_number_with_a_unit(given: str, seconds: float) -> None:
    assert audit_interval(parsed("--audit-interval", given), in_cluster=False) == seconds


@pytest.mark.parametrize(("in_cluster", "seconds"), [(True, 3600.0), (False, None)])
def test_by_default_hourly_inside_a_cluster_and_never_outside(
    in_cluster: bool, seconds: float | None
) -> None:
    assert audit_interval(parsed(), in_cluster=in_cluster) == seconds


def test_zero_turns_it_off_inside_a_cluster_too() -> None:
    assert audit_interval(parsed("--audit-interval", "0"), in_cluster=True) is None


@pytest.mark.parametrize("given", ["soon", "-5", "10d", "1h30m"])
def test_anything_else_is_a_usage_error(given: str) -> None:
    with pytest.raises(SystemExit):
        parsed("--audit-interval", given)
