"""Reading an admission request (webhook/engine/request.py): nesting or a size beyond any
real object is refused before anything else runs, naming where."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.request import MAX_DEPTH, MAX_VALUES, measure, refusal, surely_within


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


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(["", "{}", "[]", "{", "[", "}{", "[{}]", '"{}"', "a{}b[]"]),
    st.text(alphabet='{}[]\\"a,', max_size=6),
)
"""Scalars, among them strings that hold brackets, pairs of them and quotes."""

JSON = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet="{}[]a", max_size=3), inner, max_size=4)
    ),
    max_leaves=40,
)


@st.composite
def near_the_limits(draw: st.DrawFn) -> Any:
    """A value nested about MAX_DEPTH deep (empty and non-empty containers, scalars and
    brackets in strings along the way), or a list about MAX_VALUES long."""
    if draw(st.integers(0, 9)) == 0:
        return [draw(LEAVES)] * (MAX_VALUES - draw(st.integers(-2, 2)))
    value = draw(JSON)
    for _ in range(draw(st.integers(MAX_DEPTH - 8, MAX_DEPTH + 2))):
        siblings = draw(st.lists(JSON, max_size=2))
        value = (
            {"k{}": value, **{f"s{i}": v for i, v in enumerate(siblings)}}
            if draw(st.booleans())
            else [*siblings, value]
        )
    return value


# Values nested about MAX_DEPTH deep are slow to draw on a loaded machine; the
# examples, not their drawing time, are what these tests are about.
NEAR_THE_LIMITS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestTheCheapBound:
    """``refusal`` skips the walk for a value its JSON text shows within the limits: it
    must never say so of one the walk refuses."""

    @NEAR_THE_LIMITS
    @given(st.one_of(JSON, near_the_limits()))
    def test_a_value_surely_within_the_limits_is_within_them(self, value: Any) -> None:
        if surely_within(value):
            depth, values = measure(value)
            assert depth <= MAX_DEPTH and values <= MAX_VALUES

    @NEAR_THE_LIMITS
    @given(near_the_limits())
    def test_refusal_is_the_walks_whatever_the_bound_says(self, value: Any) -> None:
        depth, values = measure(value)
        decision = refusal(pod_create(value))
        if depth <= MAX_DEPTH and values <= MAX_VALUES:
            assert decision is None
        else:
            assert decision is not None
            assert decision.code == (400 if depth > MAX_DEPTH else 413)

    def test_a_pod_is_within_the_limits_by_the_bound_alone(self) -> None:
        assert surely_within(pod(containers=[container(gpus=1)]))

    @pytest.mark.parametrize(
        "value",
        [{1: "key not a string"}, 2**70, nested(300), nested(MAX_DEPTH + 1)],
        ids=["int-key", "huge-int", "past-orjson-depth", "too-deep"],
    )
    def test_what_the_bound_cannot_tell_is_walked(self, value: Any) -> None:
        assert not surely_within(value)


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
