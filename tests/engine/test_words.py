"""The words of a denial and of a warning (webhook.engine.decision): one function each, and
a warning whole within what kube-apiserver passes on (256 characters, 4096 bytes in all)."""

from __future__ import annotations

import pytest

from webhook.engine.decision import (
    DENIAL_LIMIT,
    REASONS_LIMIT,
    WARN,
    WARNING_HEADER,
    WARNING_LIMIT,
    WARNINGS_SIZE_LIMIT,
    Violation,
    denial,
    judge,
    subject,
    warning,
    within_limits,
)

PREFIX = "gpu-admission: gpu-count: "
ACCEPTED = "; set it to one of: inference, training"


class TestDenial:
    def test_a_pod_is_denied_with_its_reasons(self) -> None:
        assert denial(subject("pod", "ml", "p"), ["a", "b", "a"]) == (
            "gpu-admission denied pod 'ml/p': a; b"
        )

    def test_a_workload_is_denied_for_each_template_by_its_path(self) -> None:
        named = subject("CronJob", "ml-train", "nightly-eval")
        assert denial(named, templates=[("spec.jobTemplate.spec.template", ["a", "b"])]) == (
            "gpu-admission denied CronJob 'ml-train/nightly-eval' template "
            "(spec.jobTemplate.spec.template): a; b"
        )
        assert denial(named, templates=[("x", ["a"]), ("y", ["b"])]) == (
            "gpu-admission denied CronJob 'ml-train/nightly-eval' template (x): a; template (y): b"
        )

    def test_an_object_without_a_namespace_is_named_alone(self) -> None:
        assert subject("pod", "", "p") == "gpu-admission denied pod 'p'"

    def test_judge_forms_its_denial_with_the_same_function(self) -> None:
        violations = [Violation("gpu-count", "too many"), Violation("gpu-model", "no such")]
        named = subject("pod", "ml", "p")
        assert judge(violations, named).message == denial(named, ["too many", "no such"])

    def test_a_huge_denial_is_cut(self) -> None:
        text = denial(subject("pod", "ml", "p"), templates=[(str(n), ["x" * 1000] * 20) for n in range(20)])  # fmt: skip
        assert DENIAL_LIMIT < len(text) < DENIAL_LIMIT + 40


def message_of(length: int, accepted: str = ACCEPTED) -> str:
    """A message whose warning is `length` characters: a quoted name, then `accepted`."""
    name = "n" * (length - len(PREFIX) - len("container '' asks") - len(accepted))
    return f"container '{name}' asks{accepted}"


class TestWarningLength:
    @pytest.mark.parametrize("length", [255, 256])
    def test_a_warning_that_fits_is_whole(self, length: int) -> None:
        message = message_of(length)
        assert warning(message, "gpu-count") == PREFIX + message
        assert len(PREFIX + message) == length

    def test_one_character_over_shortens_the_name_not_the_accepted_list(self) -> None:
        text = warning(message_of(257), "gpu-count")
        assert len(text) == WARNING_LIMIT == 256
        assert text.endswith(ACCEPTED)
        assert "nnn...' asks" in text

    def test_a_list_that_only_fits_when_the_name_is_shortened_is_kept_whole(self) -> None:
        accepted = "; use one of: " + ", ".join(f"class-{n}" for n in range(12))
        message = f"label gpu-admission.io/workload={'v' * 120!r} names no workload class{accepted}"
        assert len(PREFIX + message) > WARNING_LIMIT
        assert len(PREFIX) + len(accepted) + len("label gpu-admission.io/workload='vvvvvvvv...' names no workload class") <= WARNING_LIMIT  # fmt: skip

        text = warning(message, "gpu-count")
        assert len(text) <= WARNING_LIMIT
        assert text.endswith(accepted)
        assert "names no workload class" in text and "'vvvv" in text and "...'" in text

    def test_the_longest_quoted_value_is_shortened_first(self) -> None:
        message = f"container 'app' sets {'x' * 400!r}; remove it"
        text = warning(message)
        assert "container 'app' sets 'xxxxxxxx" in text and text.endswith("...'; remove it")
        assert len(text) == WARNING_LIMIT

    def test_without_a_quoted_value_the_middle_is_cut(self) -> None:
        message = "a" * 200 + " " + "b" * 200 + ACCEPTED
        text = warning(message, "gpu-count")
        assert len(text) == WARNING_LIMIT
        assert text.startswith(PREFIX + "aaa") and "..." in text and text.endswith(ACCEPTED)

    def test_advice_too_long_to_fit_is_cut_at_its_end(self) -> None:
        text = warning("short; " + "z" * 400, "gpu-count")
        assert len(text) == WARNING_LIMIT
        assert text.startswith(PREFIX + "short; zzz") and text.endswith("...")


class TestWarningsInAll:
    def test_more_than_the_reasons_limit_are_counted(self) -> None:
        warnings = within_limits(f"w{n}" for n in range(REASONS_LIMIT + 3))
        assert warnings[-1] == "gpu-admission: and 3 more warnings"
        assert len(warnings) == REASONS_LIMIT + 1

    def test_their_headers_stay_within_kube_apiservers_4096_bytes(self) -> None:
        # 10 warnings of 256 characters of 2 bytes each: 5,210 bytes of headers
        long = [("é" * 250) + str(n).rjust(6, "0") for n in range(10)]
        warnings = within_limits(long)
        sizes = [WARNING_HEADER + len(w.encode()) for w in warnings]
        assert sum(sizes) <= WARNINGS_SIZE_LIMIT
        assert warnings[-1].startswith("gpu-admission: and ")
        kept = len(warnings) - 1
        assert warnings[-1] == f"gpu-admission: and {10 - kept} more warnings"
        assert list(warnings[:kept]) == long[:kept]

    def test_repeated_warnings_are_said_once(self) -> None:
        violations = [Violation("gpu-count", "same", WARN)] * 3
        assert judge(violations, "s").warnings == ("gpu-admission: gpu-count: same",)
