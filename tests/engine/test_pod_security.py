"""Whether a namespace enforces Pod Security baseline (webhook/engine/pod_security.py)."""

from __future__ import annotations

import pytest

from webhook.engine.pod_security import ENFORCE_LABEL, below_baseline


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_a_namespace_enforcing_baseline_or_restricted_is_not_named(level: str) -> None:
    assert below_baseline({ENFORCE_LABEL: level, "team": "ml"}) is None


def test_a_namespace_enforcing_privileged_is_named_with_its_level() -> None:
    assert below_baseline({ENFORCE_LABEL: "privileged"}) == f"{ENFORCE_LABEL}=privileged"


@pytest.mark.parametrize("labels", [None, {}, {"pod-security.kubernetes.io/warn": "baseline"}])
def test_a_namespace_without_an_enforce_label_is_named_as_left_to_the_default(
    labels: dict[str, str] | None,
) -> None:
    why = below_baseline(labels)

    assert why is not None
    assert why.startswith(f"no {ENFORCE_LABEL} label")


def test_a_level_spelled_otherwise_is_not_taken_for_baseline() -> None:
    assert below_baseline({ENFORCE_LABEL: "Baseline"}) == f"{ENFORCE_LABEL}=Baseline"
