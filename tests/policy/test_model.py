"""The policy model takes values as written, never coerced (webhook/policy/model.py)."""

from __future__ import annotations

import pytest

from webhook.errors import PolicyError
from webhook.policy import load_policy_text
from webhook.policy.load import default_policy_text

COERCIONS = {
    "count-as-float": ("  inference:\n    gpusPerNode: 8\n", "  inference:\n    gpusPerNode: 8.0\n", "pools.inference.gpusPerNode"),
    "count-as-text": ("value: 1000000}\n    defaultGpus: 1", 'value: 1000000}\n    defaultGpus: "2"', "classes.inference.defaultGpus"),
    "priority-as-text": ("value: 1000}", 'value: "1000"}', "classes.training.priorityClass.value"),
    "weight-as-float": ("      weight: 100\n", "      weight: 100.0\n", "classes.training.coLocation.weight"),
    "count-as-boolean": ("value: 1000000}\n    defaultGpus: 1", "value: 1000000}\n    defaultGpus: true", "classes.inference.defaultGpus"),
    "boolean-as-text": ("kind: Policy\n", 'kind: Policy\nenforcement: {classes: {training: {mutate: "false"}}}\n', "enforcement.classes.training.mutate"),
    "boolean-as-number": ("kind: Policy\n", "kind: Policy\nenforcement: {classes: {training: {mutate: 0}}}\n", "enforcement.classes.training.mutate"),
}  # fmt: skip


@pytest.mark.parametrize(("old", "new", "path"), COERCIONS.values(), ids=COERCIONS)
def test_a_value_of_another_type_is_refused_not_coerced(old: str, new: str, path: str) -> None:
    text = default_policy_text()
    assert old in text, old
    text = text.replace(old, new, 1)

    with pytest.raises(PolicyError) as raised:
        load_policy_text(text, "coerced.yaml")

    [problem] = raised.value.problems
    assert problem.path == path
    assert problem.line is not None


def test_whole_numbers_and_booleans_as_yaml_writes_them_are_taken() -> None:
    text = default_policy_text() + "enforcement: {classes: {training: {mutate: false}}}\n"

    policy = load_policy_text(text, "typed.yaml")

    assert policy.pools["inference"].gpus_per_node == 8
    assert policy.classes["training"].mutate is False
