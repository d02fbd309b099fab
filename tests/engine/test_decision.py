"""Outcomes (webhook/engine/decision.py): what a message may repeat of a user's value."""

from __future__ import annotations

from pathlib import Path

import pytest

import webhook
from webhook.engine.decision import (
    DENIAL_LIMIT,
    ECHO_LIMIT,
    REASONS_LIMIT,
    VIOLATION_LIMIT,
    WARN,
    Violation,
    deny,
    echo,
    judge,
    malformed,
    reasons,
    shorten,
    subject,
)


class TestEchoedValues:
    @pytest.mark.parametrize("text", ["", "all", "x" * ECHO_LIMIT])
    def test_a_short_text_is_shown_whole(self, text: str) -> None:
        assert shorten(text) == text

    def test_a_long_text_is_cut_with_its_length(self) -> None:
        assert shorten("x" * 1_000_000) == "x" * ECHO_LIMIT + "... (1,000,000 characters)"

    def test_a_short_value_is_quoted_as_python_shows_it(self) -> None:
        assert echo("all") == "'all'"
        assert echo(["a", 1]) == "['a', 1]"

    def test_a_long_string_is_quoted_cut_and_counted(self) -> None:
        shown = echo("0," * 500_000)
        assert shown == repr("0," * (ECHO_LIMIT // 2)) + "... (1,000,000 characters)"

    def test_a_long_value_of_another_type_is_cut_after_its_repr(self) -> None:
        shown = echo(list(range(100_000)))
        assert shown.startswith("[0, 1, 2, ")
        assert len(shown) < 2 * ECHO_LIMIT


class TestReasons:
    def test_reasons_are_joined_once_each(self) -> None:
        assert reasons(["a", "b", "a"]) == "a; b"

    def test_past_the_limit_the_others_are_counted(self) -> None:
        listed = reasons([f"reason {n}" for n in range(45_000)])
        assert listed.endswith(f"reason {REASONS_LIMIT - 1}; and 44,990 more")
        assert listed.count(";") == REASONS_LIMIT

    def test_one_overlong_reason_is_cut(self) -> None:
        assert len(reasons(["x" * 1_000_000])) < VIOLATION_LIMIT + 40


class TestBoundedDecisions:
    def test_a_denial_of_many_containers_stays_short(self) -> None:
        violations = [
            Violation("visible-devices", f"container 'c{n}' sets it") for n in range(45_000)
        ]
        decision = deny(violations, "gpu-admission denied pod 'ml/p'")
        assert len(decision.message) < 1_000
        assert len(decision.violations) == 45_000

    def test_a_denial_of_reasons_nested_in_reasons_stays_under_its_limit(self) -> None:
        """Was 8,193 characters: a workload of ten templates with long reasons each."""
        message = "gpu-admission denied PyTorchJob 'ml/j' " + reasons(
            [f"template (spec.x{n}): " + "y" * VIOLATION_LIMIT for n in range(REASONS_LIMIT)]
        )
        decision = judge([Violation("node-name", "x")], "subject", message)
        assert len(message) > DENIAL_LIMIT
        assert len(decision.message) <= DENIAL_LIMIT + 32
        assert decision.message.endswith(f"... ({len(message):,} characters)")

    def test_warnings_past_the_limit_are_counted_in_one_more_warning(self) -> None:
        violations = [Violation("gpu-count", f"problem {n}", WARN) for n in range(100)]
        warnings = judge(violations, "pod").warnings
        assert len(warnings) == REASONS_LIMIT + 1
        assert warnings[-1] == "gpu-admission: and 90 more warnings"

    def test_a_malformed_reason_naming_a_huge_key_is_cut(self) -> None:
        decision = malformed("metadata.labels." + "k" * 1_000_000 + ": must be a string")
        assert decision.code == 400
        assert len(decision.message) < 600
        assert decision.message.startswith("malformed object: metadata.labels.kkk")


class TestDenialSubjects:
    def test_a_subject_names_the_kind_and_the_namespaced_name(self) -> None:
        assert subject("CronJob", "ml", "nightly") == "gpu-admission denied CronJob 'ml/nightly'"

    def test_a_cluster_scoped_object_is_named_alone(self) -> None:
        assert subject("DeviceClass", "", "gpu") == "gpu-admission denied DeviceClass 'gpu'"

    def test_a_name_kubernetes_does_not_bound_is_echoed_short(self) -> None:
        named = subject("ConfigMap", "ml", "k" * 1_000, quote=echo)

        assert named == "gpu-admission denied ConfigMap " + echo("ml/" + "k" * 1_000)
        assert len(named) < 200

    def test_no_module_of_the_package_words_a_denial_but_this_one(self) -> None:
        package = Path(webhook.__file__).parent
        wording = [
            str(path.relative_to(package))
            for path in package.rglob("*.py")
            for line in path.read_text().splitlines()
            if 'f"gpu-admission denied' in line or "'gpu-admission denied" in line
        ]
        assert wording == ["engine/decision.py"]
