"""Patches (webhook/engine/patch.py): our own application of a patch gives exactly what
jsonpatch gives, and changes neither the document nor the patch."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import pod_create
from tests.engine.test_properties import ENGINE, budget, json_values, pods
from webhook.engine.patch import PatchConflict, apply_patch, escape

Json = Any
KEYS = st.text(max_size=4) | st.sampled_from(["a", "~", "/", "~1", "~0", "-", "0", "01"])


def containers_in(value: Json, here: str = "") -> list[tuple[str, Json]]:
    """(pointer, container) for every mapping and list in `value`, itself included."""
    found: list[tuple[str, Json]] = []
    if isinstance(value, dict):
        found.append((here, value))
        for key, item in value.items():
            found += containers_in(item, f"{here}/{escape(key)}")
    elif isinstance(value, list):
        found.append((here, value))
        for index, item in enumerate(value):
            found += containers_in(item, f"{here}/{index}")
    return found


@st.composite
def operation_on(draw: st.DrawFn, document: Json) -> dict[str, Json]:
    """One add or replace that applies to `document`: at its root, or in one of its
    mappings or lists, at a new or an existing key, index or end."""
    value = draw(json_values(max_leaves=4))
    places = containers_in(document)
    if not places or draw(st.integers(0, 9)) == 0:
        return {"op": draw(st.sampled_from(["add", "replace"])), "path": "", "value": value}
    pointer, container = draw(st.sampled_from(places))
    if isinstance(container, dict):
        key = draw(st.sampled_from(sorted(container)) | KEYS if container else KEYS)
        op = "replace" if key in container and draw(st.booleans()) else "add"
        return {"op": op, "path": f"{pointer}/{escape(key)}", "value": value}
    if container and draw(st.booleans()):
        index = draw(st.integers(0, len(container) - 1))
        return {"op": "replace", "path": f"{pointer}/{index}", "value": value}
    token = draw(st.sampled_from(["-", *map(str, range(len(container) + 1))]))
    return {"op": "add", "path": f"{pointer}/{token}", "value": value}


@st.composite
def documents_and_patches(draw: st.DrawFn) -> tuple[Json, list[dict[str, Json]]]:
    document = draw(json_values(max_leaves=20))
    current, operations = copy.deepcopy(document), []
    for _ in range(draw(st.integers(0, 8))):
        operation = draw(operation_on(current))
        operations.append(operation)
        current = jsonpatch.apply_patch(current, [operation])
    return document, operations


@budget(400)
@given(documents_and_patches())
def test_a_patch_applies_exactly_as_jsonpatch_applies_it(
    drawn: tuple[Json, list[dict[str, Json]]],
) -> None:
    document, operations = drawn
    document_before, operations_before = copy.deepcopy(document), copy.deepcopy(operations)

    assert apply_patch(document, operations) == jsonpatch.apply_patch(document, operations)
    assert document == document_before
    assert operations == operations_before


@budget(150)
@given(pods())
def test_our_mutation_applies_exactly_as_jsonpatch_applies_it(pod: Json) -> None:
    decision = ENGINE.mutate(pod_create(pod))
    patch = list(decision.patch)
    before = copy.deepcopy(pod)

    assert apply_patch(pod, patch) == jsonpatch.apply_patch(pod, patch)
    assert pod == before


def test_an_added_value_is_copied_before_an_addition_beneath_it() -> None:
    added: dict[str, Json] = {"env": []}
    patch: list[dict[str, Json]] = [
        {"op": "add", "path": "/c", "value": added},
        {"op": "add", "path": "/c/env/-", "value": 1},
    ]
    assert apply_patch({}, patch) == {"c": {"env": [1]}}
    assert added == {"env": []}


def test_what_the_patch_does_not_touch_is_shared_not_copied() -> None:
    untouched: dict[str, Json] = {"big": list(range(1000))}
    document = {"spec": {"a": untouched, "b": {}}}
    result = apply_patch(document, [{"op": "add", "path": "/spec/b/x", "value": 1}])
    assert result["spec"]["a"] is untouched
    assert result["spec"] is not document["spec"]


@pytest.mark.parametrize(
    "document, operation",
    [
        ({}, {"op": "replace", "path": "/a", "value": 1}),
        ([], {"op": "replace", "path": "/0", "value": 1}),
        ([], {"op": "add", "path": "/1", "value": 1}),
        ([1], {"op": "add", "path": "/01", "value": 1}),
        ([1], {"op": "replace", "path": "/-", "value": 1}),
        ({"a": 1}, {"op": "add", "path": "/a/b", "value": 1}),
        ({}, {"op": "add", "path": "/a/b", "value": 1}),
        ({}, {"op": "add", "path": "a", "value": 1}),
    ],
    ids=[
        "replace-missing-key", "replace-missing-index", "add-past-the-end", "leading-zero",
        "replace-the-end", "through-a-scalar", "through-a-missing-key", "not-a-pointer",
    ],
)  # fmt: skip
def test_an_operation_jsonpatch_refuses_is_refused(document: Json, operation: Json) -> None:
    with pytest.raises((jsonpatch.JsonPatchException, jsonpointer.JsonPointerException)):
        jsonpatch.apply_patch(document, [operation])
    with pytest.raises(PatchConflict):
        apply_patch(document, [operation])


def test_only_add_and_replace_are_applied() -> None:
    with pytest.raises(PatchConflict, match="only add and replace"):
        apply_patch({"a": 1}, [{"op": "remove", "path": "/a"}])
