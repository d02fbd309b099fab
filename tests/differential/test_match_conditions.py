"""What kube-apiserver sends to each webhook, asked of kube-apiserver's own matching code.

The webhook configurations are rendered from the handler registry; the matching oracle
(tests/differential/matching/main.go) evaluates each webhook's rules, objectSelector and
matchConditions on generated requests (tests/differential/admission_requests.py) as
kube-apiserver's dispatcher does. For every request and every webhook:

- the rules and the objectSelector match exactly when the handler's Python twins say
  so (``ResourceRule.request_keys``, ``LabelSelector.matches``), so routing a request
  by them is routing it as kube-apiserver does;
- a request the webhook is called for is judged by that webhook's own handler;
- the matchConditions (which kube-apiserver evaluates only once the rules and the
  objectSelector matched) never fail to evaluate (an error would refuse the request
  under ``failurePolicy: Fail``), and their Python twins (``webhook.engine.handlers.
  twins``) say what their CEL says;
- what `check` sends to each side (``Routes.sent``: a webhook of it is called and its
  judge reads the request) is what kube-apiserver calls, so offline verdicts are live ones;
- what they keep from the service is what its judge, asked directly, admits unchanged:
  no patch, no warning, no violation in any mode, but for the two narrowings made on
  purpose (``_kept_by_design``). A condition that hid a request its judge has an
  opinion on would be a way around the policy.

Three times GPU_ADMISSION_DIFFERENTIAL_EXAMPLES sets the examples of each search (900;
`make fuzz` runs 60,000: a request costs a few milliseconds); it is derandomized, so that
CI fails or passes the same way each time. A condition narrowed by a fault planted in
its CEL shows that the search finds what it hides.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, find, given, settings

from tests.conftest import admission_review
from tests.differential.admission_requests import Json, admission_requests
from tests.differential.matching import Matched, MatchingOracle
from webhook.engine import Engine
from webhook.engine.handlers import HANDLERS, Handler, HandlerRegistry, Review
from webhook.engine.handlers.declaration import Condition, request_key
from webhook.engine.handlers.env_keys import VALIDATE_ENV_KEYS
from webhook.engine.handlers.pods import MUTATE_UNCLASSED
from webhook.engine.handlers.twins import env_key_held, gpu_relevant_pod, judged_change
from webhook.engine.request import AdmissionRequest
from webhook.http.review import read_request
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.policy import Policy, load_default_policy, load_policy_file

POLICIES = Path(__file__).resolve().parents[2] / "policies"
SHIPPED = {
    "default": load_default_policy(),
    "overflow": load_policy_file(POLICIES / "overflow.yaml"),
    # a team's own: other labels, classes and keys, and a pool without a taint
    "team": load_policy_file(POLICIES / "examples" / "acme.yaml"),
}
ENDPOINT = Endpoint(base64.b64encode(b"not a certificate").decode(), url="https://gpu-admission")

SEARCH = settings(
    max_examples=3 * int(os.environ.get("GPU_ADMISSION_DIFFERENTIAL_EXAMPLES", "300")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def disagreements(
    policy: Policy, engine: Engine, review: Json, matched: dict[str, Matched]
) -> list[str]:
    """What the handlers' Python twins say of `review` that kube-apiserver does not."""
    request = read_request(orjson.dumps({**admission_review({}), "request": review}))
    found = []
    called = {
        _judge(engine, h, request)
        for h in engine.handlers.installed()
        if matched[h.webhook_name].called
    }
    for handler in engine.handlers.installed():
        seen = matched[handler.webhook_name]
        found += _twins_disagree(policy, handler, request, seen)
        if not (seen.rules and seen.selector):
            continue  # kube-apiserver evaluates no condition of a webhook it does not match
        if seen.conditions == "error":
            found.append(f"{handler.name}: its matchConditions failed: {seen.error}")
            continue
        if handler.sends(policy, request) != (seen.conditions == "true"):
            found.append(f"{handler.name}: the twins and the CEL disagree (CEL: {seen.conditions})")
        if seen.called and handler.judged_by_engine(policy):
            route = engine.routes.route(handler.name, request)
            if route is not None and route[0] is not handler:
                found.append(f"{handler.name}: called, but judged by {route[0].name}")
        if seen.called or _kept_by_design(policy, handler, request):
            continue
        if _judge(engine, handler, request) in called - {None}:
            continue  # another webhook brings the request to the same judge
        found += _hidden_opinion(engine, handler, request, seen.failed)
    return found + _offline_disagrees(engine, request, matched)


def _offline_disagrees(
    engine: Engine, request: AdmissionRequest, matched: dict[str, Matched]
) -> list[str]:
    """`check` and `explain` judge a request only by the webhooks of each side that
    kube-apiserver calls for it (``Routes.sent``): the same ones, whose judges read it."""
    found = []
    for mutating in (True, False):
        called = any(
            matched[h.webhook_name].called and request_key(request) in engine.routes.own[h.name]
            for h in engine.handlers.installed()
            if h.mutating == mutating
        )
        if engine.routes.sent(request, mutating=mutating) != called:
            side = "mutating" if mutating else "validating"
            found.append(
                f"offline: sent to a {side} webhook {not called}, kube-apiserver: {called}"
            )
    return found


def _twins_disagree(
    policy: Policy, handler: Handler, request: AdmissionRequest, seen: Matched
) -> list[str]:
    keys = {key for rule in handler.rules(policy) for key in rule.request_keys()}
    selected = handler.selector is None or handler.selector.matches(policy, request)
    found = []
    if seen.rules != (request_key(request) in keys):
        found.append(f"{handler.name}: kube-apiserver's rules match: {seen.rules}")
    if seen.selector != selected:
        found.append(f"{handler.name}: kube-apiserver's objectSelector matches: {seen.selector}")
    return found


def _kept_by_design(policy: Policy, handler: Handler, request: AdmissionRequest) -> bool:
    """The two narrowings the conditions make on purpose: a pod's update that leaves
    where it can land and what it was admitted as as they were (its CREATE was judged;
    other labels, annotations and images are not judged again), and debug containers
    added to a pod of no class that the policy has no opinion on (no GPU node runs it,
    so none has GPUs to hide)."""
    if not judged_change(policy, request):
        return True
    return handler is MUTATE_UNCLASSED and not gpu_relevant_pod(policy, request)


def _judge(engine: Engine, handler: Handler, request: AdmissionRequest) -> object:
    """The judge of the request's operation by `handler`'s own rule, None for none."""
    rule = engine.routes.own[handler.name].get(request_key(request))
    return None if rule is None else rule.judges[request.operation]


def _hidden_opinion(
    engine: Engine, handler: Handler, request: AdmissionRequest, condition: str
) -> list[str]:
    """The judge of the request's operation, asked of a request its conditions keep from it."""
    rule = engine.routes.own[handler.name].get(request_key(request))
    judge = None if rule is None else rule.judges[request.operation]
    if judge is None:
        return []
    decision = judge(engine, Review(request))
    if decision.allowed and not (decision.patch or decision.warnings or decision.violations):
        return []
    return [
        f"{handler.name}: its condition {condition!r} keeps from the service a request its "
        f"judge answers allowed={decision.allowed} with {len(decision.patch)} patch "
        f"operation(s), warnings {list(decision.warnings)}, message {decision.message!r}"
    ]


@pytest.mark.parametrize("shipped", sorted(SHIPPED))
def test_kube_apiserver_sends_each_webhook_what_its_handler_says_and_hides_nothing_judged(
    shipped: str, matching_oracle: MatchingOracle
) -> None:
    policy = SHIPPED[shipped]
    engine = Engine(policy)
    webhooks = matching_oracle.configure(render_webhook_configurations(policy, ENDPOINT))
    assert webhooks == len(HANDLERS.installed())

    @SEARCH
    @given(review=admission_requests(policy))
    def search(review: Json) -> None:
        (matched,) = matching_oracle.matched([review])
        assert disagreements(policy, engine, review, matched) == []

    search()


def _narrowed_env_keys(policy: Policy) -> str:
    """The ConfigMaps' condition as it would be if it knew one variable only."""
    return "has(object.data) && object.data.exists(k, k == 'NVIDIA_VISIBLE_DEVICES')"


def test_a_condition_that_hides_what_its_judge_refuses_is_found(
    matching_oracle: MatchingOracle,
) -> None:
    policy = SHIPPED["default"]
    narrowed = Condition("device-request-key", _narrowed_env_keys, env_key_held)
    planted = dataclasses.replace(VALIDATE_ENV_KEYS, conditions=(narrowed,))
    handlers = HandlerRegistry(planted if h is VALIDATE_ENV_KEYS else h for h in HANDLERS)
    engine = Engine(policy, handlers=handlers)
    matching_oracle.configure(render_webhook_configurations(policy, ENDPOINT, handlers=handlers))

    found = find(
        admission_requests(policy),
        lambda review: bool(
            disagreements(policy, engine, review, matching_oracle.matched([review])[0])
        ),
        settings=settings(SEARCH, max_examples=2000),
    )

    problems = disagreements(policy, engine, found, matching_oracle.matched([found])[0])
    assert any("validate-env-keys: the twins and the CEL disagree" in p for p in problems)
    assert any(
        "keeps from the service a request its judge answers allowed=False" in p for p in problems
    )
