"""The handler registry (webhook/engine/handlers/registry.py): each webhook declared once,
each request routed to one judge, requests of configurations of before judged as their
own webhook judges them."""

from __future__ import annotations

import pytest

from tests.builders import pod, pod_create
from webhook.engine.handlers import HANDLERS, Handler, HandlerConflict, HandlerRegistry
from webhook.engine.handlers.autoscalers import WARN_AUTOSCALERS
from webhook.engine.handlers.bindings import VALIDATE_BINDINGS
from webhook.engine.handlers.declaration import CLASSED, UNCLASSED, ResourceRule, static
from webhook.engine.handlers.pods import (
    MUTATE,
    MUTATE_UNCLASSED,
    VALIDATE,
    VALIDATE_UNCLASSED,
    VALIDATE_UPDATES,
    validate_pod_create,
)
from webhook.engine.handlers.registry import Routes
from webhook.policy import Policy, load_default_policy


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_default_policy()


@pytest.fixture(scope="module")
def routes(policy: Policy) -> Routes:
    return HANDLERS.routes(policy)


def test_every_webhook_has_a_name_and_a_path_of_its_own(policy: Policy) -> None:
    names = [handler.name for handler in HANDLERS]
    assert len(set(names)) == len(names) == 13
    assert {h.path for h in HANDLERS} == {f"/{name}" for name in names}
    assert all(h.webhook_name == f"{h.name}.gpu-admission.io" for h in HANDLERS)
    assert [h.name for h in HANDLERS][:2] == ["mutate", "mutate-unclassed"]


def test_only_the_policy_configmap_is_not_judged_by_the_engine(policy: Policy) -> None:
    assert [h.name for h in HANDLERS if not h.judged_by_engine(policy)] == ["validate-policy"]


def test_two_handlers_under_one_name_are_refused() -> None:
    with pytest.raises(HandlerConflict, match="two webhooks are named 'validate'"):
        HandlerRegistry((VALIDATE, VALIDATE))


def test_a_handler_matching_one_request_twice_is_refused(policy: Policy) -> None:
    rule = ResourceRule("", ("v1",), ("pods",), {"CREATE": validate_pod_create})
    twice = Handler("twice", mutating=False, rules=static(rule, rule), summary="")

    with pytest.raises(HandlerConflict, match="twice matches"):
        HANDLERS.with_handler(twice).routes(policy)


def test_a_pod_create_goes_to_the_handlers_its_label_selects(routes: Routes) -> None:
    labelled = pod_create(pod("training"))
    unlabelled = pod_create(pod(None))

    assert routes.matching(labelled, mutating=True) == (MUTATE, MUTATE.rules(routes.policy)[0])
    assert routes.matching(labelled, mutating=False)[0] is VALIDATE  # type: ignore[index]
    assert routes.matching(unlabelled, mutating=False)[0] is VALIDATE_UNCLASSED  # type: ignore[index]


def test_a_pod_losing_its_label_at_an_update_is_still_sent_as_a_class_pod(routes: Routes) -> None:
    before, after = pod("training"), pod(None)
    update = pod_create(after, operation="UPDATE", old_object=before)

    assert CLASSED.matches(routes.policy, update)
    assert UNCLASSED.matches(routes.policy, update)
    assert routes.matching(update, mutating=False)[0] is VALIDATE_UPDATES  # type: ignore[index]


def test_debug_containers_of_any_pod_are_isolated_by_one_mutating_handler(routes: Routes) -> None:
    for labels, handler in (("training", MUTATE), (None, MUTATE_UNCLASSED)):
        debug = pod_create(pod(labels), operation="UPDATE", subresource="ephemeralcontainers")
        assert routes.matching(debug, mutating=True)[0] is handler  # type: ignore[index]


def test_a_request_sent_to_validate_by_configurations_of_before_is_judged_by_its_own_handler(
    routes: Routes,
) -> None:
    binding = pod_create(
        {"apiVersion": "v1", "kind": "Binding", "target": {"name": "gpu-1"}},
        subresource="binding",
    )
    autoscaler = pod_create(
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"},
        group="autoscaling",
        version="v2",
        kind="HorizontalPodAutoscaler",
        resource="horizontalpodautoscalers",
    )

    assert routes.route("validate", binding)[0] is VALIDATE_BINDINGS  # type: ignore[index]
    assert routes.route("validate", autoscaler)[0] is WARN_AUTOSCALERS  # type: ignore[index]
    assert routes.reads_scale_target("validate", autoscaler)
    assert not routes.reads_scale_target("validate", binding)
    assert routes.route("mutate", binding) is None


def test_only_a_binding_reads_what_it_judges_afresh(routes: Routes) -> None:
    binding = pod_create(
        {"apiVersion": "v1", "kind": "Binding", "target": {"name": "gpu-1"}},
        subresource="binding",
    )

    assert routes.reads_afresh(binding, "validate-bindings")
    assert routes.reads_afresh(binding)
    assert not routes.reads_afresh(pod_create(pod("training")), "validate")


def test_a_request_no_webhook_matches_is_judged_by_none(routes: Routes) -> None:
    status = pod_create(pod("training"), operation="UPDATE", subresource="status")

    assert routes.matching(status) is None
    assert routes.route("validate", status) is None
    assert routes.reads(status) is None
    assert not routes.reads_afresh(status)


def test_a_handler_replaced_keeps_its_place_and_the_others_are_the_same() -> None:
    replacement = Handler(
        VALIDATE_UPDATES.name,
        mutating=False,
        rules=static(),
        summary="another declaration of the same webhook",
    )

    replaced = HANDLERS.replacing(replacement)

    assert [h.name for h in replaced] == [h.name for h in HANDLERS]
    assert replaced.named(VALIDATE_UPDATES.name) is replacement
    assert [h for h in replaced if h is not replacement] == [
        h for h in HANDLERS if h.name != VALIDATE_UPDATES.name
    ]


def test_replacing_a_handler_the_registry_does_not_hold_is_a_key_error() -> None:
    stranger = Handler("no-such-webhook", mutating=False, rules=static(), summary="none")

    with pytest.raises(KeyError):
        HANDLERS.replacing(stranger)
