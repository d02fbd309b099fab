"""A `policy test` case that cannot be run is refused at its line, in the project's words."""

from __future__ import annotations

import pytest

from webhook.offline.cases import read_case
from webhook.offline.documents import ManifestError

CASE = """\
description: a CPU pod is left alone
object:
  apiVersion: v1
  kind: Pod
  metadata: {name: etl}
  spec:
    containers: [{name: etl, image: registry.example/etl:5}]
expect: allowed
rules: []
"""


def refusal(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as refused:
        read_case(text, "case.yaml")
    return refused.value


def test_a_well_formed_case_is_read() -> None:
    assert read_case(CASE, "case.yaml").expect == "allowed"


def test_a_misspelt_key_is_named_at_its_line_with_the_key_it_most_likely_means() -> None:
    error = refusal(CASE.replace("expect: allowed", "expectt: allowed"))

    assert error.line == 8
    assert error.reason == "expectt: unknown key 'expectt'; did you mean 'expect'?"


def test_a_missing_key_is_named() -> None:
    error = refusal(CASE.replace("expect: allowed\n", ""))

    assert error.reason == "expect: missing required key 'expect'"


def test_a_verdict_that_is_neither_allowed_nor_denied_says_which_are() -> None:
    error = refusal(CASE.replace("expect: allowed", "expect: allwed"))

    assert error.line == 8
    assert error.reason == "expect: 'allwed' is not accepted; write one of 'allowed' or 'denied'"


def test_a_rule_the_engine_does_not_have_is_refused_rather_than_never_failing() -> None:
    error = refusal(CASE.replace("rules: []", "rules: [gpu-cont]"))

    assert error.line == 9
    assert error.reason.startswith("rules[0]: unknown rule 'gpu-cont'; did you mean 'gpu-count'?")
    assert "workload-class" in error.reason


def test_no_phrase_of_the_validation_library_reaches_the_reader() -> None:
    broken = [
        CASE.replace("expect: allowed", "expectt: allowed"),
        CASE.replace("expect: allowed\n", ""),
        CASE.replace("expect: allowed", "expect: allwed"),
        CASE.replace("rules: []", "rules: {a: 1}"),
        CASE.replace("description: a CPU pod is left alone", "description: [1, 2]"),
    ]
    for text in broken:
        reason = refusal(text).reason
        assert not any(p in reason for p in ("Input should", "Field required", "Extra inputs"))


def test_a_misspelt_key_of_camel_case_is_matched_to_the_key_as_written() -> None:
    error = refusal(CASE.replace("rules: []", "rules: []\ngpumodel: A100"))

    assert error.reason == "gpumodel: unknown key 'gpumodel'; did you mean 'gpuModel'?"


def test_a_value_of_the_wrong_type_is_shown_on_one_line() -> None:
    assert refusal(CASE.replace("rules: []", "rules: 5")).reason == "rules: 5 is not a list"
    assert refusal(CASE.replace("rules: []", "rules: {a: 1}")).reason == (
        "rules: {a: 1} is not a list"
    )
