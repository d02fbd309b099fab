"""Reading an admission request (webhook/engine/request.py): nesting beyond any real object
is refused before anything recursive runs, naming where."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import container, pod, pod_create
from webhook.engine import Engine
from webhook.engine.request import MAX_DEPTH, nesting_problem


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


class TestNestingLimit:
    def test_an_object_at_the_limit_is_read(self) -> None:
        assert nesting_problem(pod_create(nested(MAX_DEPTH))) is None

    def test_one_level_more_is_a_problem_naming_its_first_steps(self) -> None:
        obj = {"spec": {"template": nested(MAX_DEPTH)}}
        assert nesting_problem(pod_create(obj)) == (
            "object.spec.template.a[0].a[0].a[0]...: nests deeper than 100 levels"
        )

    def test_the_old_object_is_read_as_well(self) -> None:
        problem = nesting_problem(pod_create(pod(), old_object={"spec": nested(600)}))
        assert problem is not None and problem.startswith("oldObject.spec.a[0].a")

    @pytest.mark.parametrize("value", [None, "x", 1, [], {}])
    def test_scalars_and_empty_values_have_no_problem(self, value: Any) -> None:
        assert nesting_problem(pod_create(value)) is None

    def test_python_recursion_could_not_read_what_is_refused(self) -> None:
        with pytest.raises(RecursionError):
            repr(nested(100_000))
        assert nesting_problem(pod_create(nested(100_000))) is not None


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
