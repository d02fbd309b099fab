"""Reading an admission request (webhook/engine/request.py): nesting or a size beyond any
real object is refused before anything else runs, naming where."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.request import MAX_DEPTH, MAX_VALUES, refusal


def nested(levels: int, leaf: Any = "x") -> Any:
    """`levels` mappings and lists, alternating, around `leaf`."""
    value = leaf
    for level in range(levels):
        value = {"a": value} if level % 2 else [value]
    return value


def deployment(template_extra: Any) -> dict[str, Any]:
    template = {
        "metadata": {"labels": {"gpu-admission.io/workload": "inference"}},
        "spec": {"containers": [container(gpus=1, args=template_extra)]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ml"},
        "spec": {"template": template},
    }


def deployment_request(obj: Any, old: Any = None) -> Any:
    return pod_create(
        obj,
        group="apps",
        kind="Deployment",
        resource="deployments",
        name="d",
        operation="UPDATE" if old is not None else "CREATE",
        old_object=old,
    )


def refused_with(request: Any) -> tuple[int, str]:
    decision = refusal(request)
    assert decision is not None and not decision.allowed
    return decision.code, decision.message


class TestNestingLimit:
    def test_an_object_at_the_limit_is_read(self) -> None:
        assert refusal(pod_create(nested(MAX_DEPTH))) is None

    def test_one_level_more_is_malformed_naming_its_first_steps(self) -> None:
        obj = {"spec": {"template": nested(MAX_DEPTH)}}
        assert refused_with(pod_create(obj)) == (
            400,
            "malformed object: object.spec.template.a[0].a[0].a[0]...: "
            "nests deeper than 100 levels",
        )

    def test_the_old_object_is_read_as_well(self) -> None:
        code, message = refused_with(pod_create(pod(), old_object={"spec": nested(600)}))
        assert code == 400
        assert message.startswith("malformed object: oldObject.spec.a[0].a")

    @pytest.mark.parametrize("value", [None, "x", 1, [], {}])
    def test_scalars_and_empty_values_are_read(self, value: Any) -> None:
        assert refusal(pod_create(value)) is None

    def test_python_recursion_could_not_read_what_is_refused(self) -> None:
        with pytest.raises(RecursionError):
            repr(nested(100_000))
        assert refused_with(pod_create(nested(100_000)))[0] == 400


class TestSizeLimit:
    def test_an_object_of_as_many_values_as_allowed_is_read(self) -> None:
        obj = {"spec": {"args": ["a"] * (MAX_VALUES - 3)}}
        assert refusal(pod_create(obj)) is None

    def test_one_value_more_is_refused_as_too_large(self) -> None:
        obj = {"spec": {"args": ["a"] * (MAX_VALUES - 2)}}
        assert refused_with(pod_create(obj)) == (
            413,
            "object too large to judge: object holds more than 100,000 values (mappings, "
            "lists, strings, numbers); no pod or workload comes near that",
        )

    def test_a_long_string_is_one_value(self) -> None:
        assert refusal(pod_create({"spec": {"args": ["a" * 5_000_000]}})) is None

    def test_the_old_object_has_a_limit_of_its_own(self) -> None:
        many = {"spec": {"env": [{"name": "a"}] * 40_000}}
        assert refusal(pod_create(many, old_object=many)) is None
        code, message = refused_with(pod_create(pod(), old_object={"spec": [0] * MAX_VALUES}))
        assert (code, message.split(" holds")[0]) == (413, "object too large to judge: oldObject")


class TestDeepObjectsAreMalformed:
    """600 levels once raised RecursionError in the deep copy of the patched pod and in the
    comparison of old and new templates at UPDATE."""

    def test_a_deep_template_is_refused_with_400_at_create(self, engine: Engine) -> None:
        decision = engine.validate(deployment_request(deployment(nested(600))))
        assert (decision.allowed, decision.code) == (False, 400)
        assert decision.message.startswith(
            "malformed object: object.spec.template.spec.containers[0].args"
        )
        assert decision.message.endswith("nests deeper than 100 levels")

    def test_a_deep_template_is_refused_with_400_at_update(self, engine: Engine) -> None:
        request = deployment_request(deployment(nested(600)), deployment(nested(600)))
        decision = engine.validate(request)
        assert (decision.allowed, decision.code) == (False, 400)

    def test_a_deep_pod_is_refused_by_both_webhooks(self, engine: Engine) -> None:
        request = pod_create(pod("inference", containers=[container(args=nested(600))]))
        for decision in (engine.mutate(request), engine.validate(request)):
            assert (decision.allowed, decision.code) == (False, 400)
            assert "nests deeper than 100 levels" in decision.message

    def test_a_template_at_the_limit_is_judged(self, engine: Engine) -> None:
        decision = engine.validate(deployment_request(deployment(nested(MAX_DEPTH - 8))))
        assert decision.allowed, decision.message


def test_a_huge_pod_is_refused_by_both_webhooks_before_it_is_read(engine: Engine) -> None:
    request = pod_create(pod("inference", containers=[container(gpus=1)] * 20_000))
    for decision in (engine.mutate(request), engine.validate(request)):
        assert (decision.allowed, decision.code) == (False, 413)
