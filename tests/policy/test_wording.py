"""Pydantic's refusals in the project's words (webhook/policy/wording.py): the key that was
meant, the type wanted and the value given, what a pattern means; never pydantic's own
sentences."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from tests.policy.edits import edited as edited_text
from webhook.policy.load import format_location
from webhook.policy.model import PolicySpec
from webhook.policy.wording import worded

PYDANTIC_PHRASES = (
    "Input should",
    "Field required",
    "Extra inputs",
    "not permitted",
    "Value error",
    "should have at least",
    "should have at most",
    "String should",
    "Dictionary should",
    "List should",
    "valid integer",
    "valid string",
    "valid boolean",
    "valid dictionary",
    "greater than or equal",
    "less than or equal",
    "after validation",
    "[type=",
    "errors.pydantic.dev",
    "instance of",
)


def edited(*replacements: tuple[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(edited_text(*replacements))
    return data


def reasons_of(data: dict[str, Any]) -> dict[str, str]:
    """Field path -> reason of each of pydantic's refusals, worded."""
    with pytest.raises(ValidationError) as refused:
        PolicySpec.model_validate(data)
    return {format_location(path): reason for path, reason in map(worded, refused.value.errors())}


INFERENCE_POOL = "  inference:\n    gpusPerNode: 8"
INFERENCE_DEFAULT = "value: 1000000}\n    defaultGpus: 1"

BROKEN = {
    "misspelt-key": (
        [(INFERENCE_POOL, "  inference:\n    gpuPerNode: 8")],
        "pools.inference.gpuPerNode",
        "unknown key 'gpuPerNode' in pools.inference; did you mean 'gpusPerNode'?",
    ),
    "missing-key": (
        [(INFERENCE_POOL, "  inference:\n    gpuPerNode: 8")],
        "pools.inference.gpusPerNode",
        "missing required key 'gpusPerNode'",
    ),
    "key-like-none": (
        [(INFERENCE_POOL, "  inference:\n    zzz: 1\n    gpusPerNode: 8")],
        "pools.inference.zzz",
        "unknown key 'zzz' in pools.inference; keys: labelValue, gpusPerNode, taints, "
        "models, mig, gpusThrough, sharing",
    ),
    "top-level-key": (
        [("kind: Policy\n", "kind: Policy\nclasess: {}\n")],
        "clasess",
        "unknown key 'clasess'; did you mean 'classes'?",
    ),
    "key-in-a-list-item": (
        [("topologyKey:", "topologyKye:")],
        "classes.training.coLocation.topologyKye",
        "unknown key 'topologyKye' in classes.training.coLocation; did you mean 'topologyKey'?",
    ),
    "float-count": (
        [(INFERENCE_POOL, "  inference:\n    gpusPerNode: 8.0")],
        "pools.inference.gpusPerNode",
        "8.0 is not a whole number; write 8",
    ),
    "fraction": (
        [(INFERENCE_POOL, "  inference:\n    gpusPerNode: 7.5")],
        "pools.inference.gpusPerNode",
        "expected a whole number, not the number 7.5",
    ),
    "count-as-text": (
        [(INFERENCE_DEFAULT, 'value: 1000000}\n    defaultGpus: "2"')],
        "classes.inference.defaultGpus",
        "'2' is text, not a whole number; write 2 without quotes",
    ),
    "count-as-word": (
        [("value: 1000}", "value: high}")],
        "classes.training.priorityClass.value",
        "expected a whole number, not the text 'high'",
    ),
    "count-as-boolean": (
        [(INFERENCE_DEFAULT, "value: 1000000}\n    defaultGpus: true")],
        "classes.inference.defaultGpus",
        "expected a whole number, not the boolean true",
    ),
    "boolean-as-text": (
        [
            (
                "kind: Policy\n",
                'kind: Policy\nenforcement: {classes: {inference: {mutate: "false"}}}\n',
            )
        ],
        "enforcement.classes.inference.mutate",
        "'false' is text, not true or false; write false without quotes",
    ),
    "text-as-number": (
        [("workload: gpu-admission.io/workload", "workload: 8")],
        "podLabels.workload",
        'expected text, not the number 8; quote it: "8"',
    ),
    "choice": (
        [("mig: none", "mig: full")],
        "pools.training.mig",
        "must be 'none', 'mixed' or 'single', not 'full'",
    ),
    "choice-read-as-boolean": (
        [("mig: none", "mig: off")],
        "pools.training.mig",
        "must be 'none', 'mixed' or 'single', not false; quote it if you meant the word",
    ),
    "pattern": (
        [("pool: gpu-pool ", "pool: Gpu Pool ")],
        "nodeLabels.pool",
        "'Gpu Pool' is not a label key: a name of letters, digits, '-', '_' and '.' starting "
        "and ending with a letter or digit, after an optional DNS prefix and '/' "
        "(example.com/name)",
    ),
    "empty-models": (
        [("      A100: {product: A100-SXM4-40GB}\n", "      {}\n")],
        "pools.inference.models",
        "must not be empty",
    ),
    "below-range": (
        [(INFERENCE_POOL, "  inference:\n    gpusPerNode: 0")],
        "pools.inference.gpusPerNode",
        "0 is out of range; write at least 1",
    ),
    "above-range": (
        [("value: 1000}", "value: 2000000000}")],
        "classes.training.priorityClass.value",
        "2000000000 is out of range; write at most 1000000000",
    ),
    "list-for-mapping": (
        [("podLabels:\n", "podLabels: []\nunused:\n")],
        "podLabels",
        "expected a mapping of keys, not a list",
    ),
    "mapping-for-list": (
        [("pools: [training]", "pools: {training: 1}")],
        "classes.training.pools",
        "expected a list, not a mapping",
    ),
    "number-as-key": (
        [("      A100: {product: A100-SXM4-40GB}", "      8: {product: A100-SXM4-40GB}")],
        "pools.inference.models.8",
        "key 8 is not text; quote it",
    ),
    "own-validator": (
        [("otherGpus: [nvidia.com/gpu.shared]", "otherGpus: [shared]")],
        "resources.otherGpus",
        "'shared' is not an extended resource name such as nvidia.com/gpu.shared",
    ),
    "empty-text": (
        [("migPrefix: nvidia.com/mig-", "migPrefix: ''")],
        "resources.migPrefix",
        "must not be empty",
    ),
}


@pytest.mark.parametrize(("replacements", "path", "reason"), BROKEN.values(), ids=BROKEN)
def test_each_refusal_is_said_in_the_projects_words(
    replacements: list[tuple[str, str]], path: str, reason: str
) -> None:
    reasons = reasons_of(edited(*replacements))

    assert reasons[path] == reason


@pytest.mark.parametrize("replacements", [b[0] for b in BROKEN.values()], ids=BROKEN)
def test_no_refusal_is_said_in_pydantics_words(replacements: list[tuple[str, str]]) -> None:
    reasons = reasons_of(edited(*replacements))

    for path, reason in reasons.items():
        assert not [p for p in PYDANTIC_PHRASES if p in reason], (path, reason)


def test_an_unknown_kind_of_error_still_gets_a_sentence_of_our_own() -> None:
    error: Any = {"type": "uuid_parsing", "loc": ("kind",), "msg": "Input should be", "input": 3}

    assert worded(error) == (("kind",), "3 is not accepted here")


def test_a_missing_policy_section_is_named_at_the_root() -> None:
    reasons = reasons_of({"apiVersion": "gpu-admission.io/v1alpha1", "kind": "Policy"})

    assert reasons == {
        "pools": "missing required key 'pools'",
        "classes": "missing required key 'classes'",
    }
