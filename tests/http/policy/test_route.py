"""``/validate-policy`` (webhook/http/policy/route.py, verdict.py): the policy
ConfigMap is admitted when its policy serves and denied with every problem otherwise."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import admission_review
from webhook.engine import Engine
from webhook.engine.decision import DENIAL_LIMIT
from webhook.http.app import create_app
from webhook.http.metrics import Metrics
from webhook.http.offload import ReviewWorker
from webhook.http.policy.route import POLICY_BODY_BYTES
from webhook.http.policy.verdict import MAX_POLICY_BYTES, POLICY_KEY, PROBLEMS_LIMIT
from webhook.install.configurations import Endpoint, render_webhook_configurations
from webhook.install.scope import FIX, SCOPE_ANNOTATION, LiveWebhooks, scope_digest
from webhook.policy import load_policy_text
from webhook.policy.load import MAX_VALUES, default_policy_text
from webhook.service.webhook_scope import NOT_COMPARED, ScopeCheck

NAME = "gpu-admission-policy"
NAMESPACE = "gpu-admission"
PATH = "/validate-policy"

TWO_TYPOS = (
    default_policy_text()
    .replace("    gpusPerNode: 8\n    # taints", "    gpusPerNod: 8\n    # taints", 1)
    .replace("pools: [training]", "pools: [trainig]", 1)
)
assert TWO_TYPOS.count("gpusPerNod:") == 1 and "[trainig]" in TWO_TYPOS


def configmap(data: dict[str, Any] | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
    }
    if data is not None:
        config["data"] = data
    return config


def policy_review(
    text: str | None, operation: str = "CREATE", old: str | None = None, uid: str = "cm-uid"
) -> dict[str, Any]:
    return admission_review(
        configmap(None if text is None else {POLICY_KEY: text}),
        operation=operation,
        uid=uid,
        kind="ConfigMap",
        resource="configmaps",
        namespace=NAMESPACE,
        name=NAME,
        old_object=None if old is None else configmap({POLICY_KEY: old}),
    )


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def client(engine: Engine, metrics: Metrics) -> TestClient:
    return TestClient(create_app(lambda: engine, metrics=metrics))


def response_of(reply: Any) -> dict[str, Any]:
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response: dict[str, Any] = body["response"]
    return response


def line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), start=1) if fragment in line)


def test_a_configmap_holding_a_policy_that_serves_is_admitted(client: TestClient) -> None:
    reply = client.post(PATH, json=policy_review(default_policy_text()))

    assert response_of(reply) == {"uid": "cm-uid", "allowed": True}


def test_a_broken_policy_is_denied_with_every_problem_at_its_line(client: TestClient) -> None:
    response = response_of(client.post(PATH, json=policy_review(TWO_TYPOS)))

    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    source = f"{NAME}/{POLICY_KEY}"
    assert response["status"]["message"].splitlines() == [
        f"the policy in ConfigMap {NAMESPACE}/{NAME} does not load (3 problems):",
        f"{source}:{line_of(TWO_TYPOS, '  inference:')}: pools.inference.gpusPerNode: "
        "missing required key 'gpusPerNode'",
        f"{source}:{line_of(TWO_TYPOS, 'gpusPerNod:')}: pools.inference.gpusPerNod: "
        "unknown key 'gpusPerNod' in pools.inference; did you mean 'gpusPerNode'?",
        f"{source}:{line_of(TWO_TYPOS, '[trainig]')}: classes.training.pools[0]: "
        "unknown pool 'trainig'; pools: inference, training",
    ]


def test_a_rule_the_engine_does_not_have_is_denied_as_the_service_would_refuse_it(
    client: TestClient,
) -> None:
    text = default_policy_text() + "\nenforcement:\n  rules: {gpu-cout: warn}\n"

    response = response_of(client.post(PATH, json=policy_review(text)))

    assert response["allowed"] is False
    assert (
        f":{line_of(text, 'gpu-cout')}: enforcement.rules.gpu-cout: unknown rule 'gpu-cout'"
        in (response["status"]["message"])
    )


def test_a_duplicated_key_is_denied_naming_both_lines(client: TestClient) -> None:
    text = default_policy_text().replace("kind: Policy\n", "kind: Policy\nkind: Policy\n", 1)

    message = response_of(client.post(PATH, json=policy_review(text)))["status"]["message"]

    first = line_of(text, "kind: Policy")
    assert f"duplicate key 'kind': given at line {first} and again at line {first + 1}" in message


def test_a_configmap_without_the_policy_key_is_denied_saying_which_key(
    client: TestClient,
) -> None:
    reply = client.post(PATH, json=policy_review(None))

    response = response_of(reply)
    assert response["allowed"] is False
    assert f"reads its policy from the key '{POLICY_KEY}'" in response["status"]["message"]


def test_an_update_that_leaves_a_broken_policy_as_it_was_is_admitted(client: TestClient) -> None:
    sent = policy_review(TWO_TYPOS, operation="UPDATE", old=TWO_TYPOS)

    assert response_of(client.post(PATH, json=sent))["allowed"] is True


def test_an_update_that_breaks_the_policy_is_denied(client: TestClient) -> None:
    sent = policy_review(TWO_TYPOS, operation="UPDATE", old=default_policy_text())

    assert response_of(client.post(PATH, json=sent))["allowed"] is False


def test_a_delete_is_admitted_without_a_look(client: TestClient) -> None:
    sent = admission_review(
        None,
        operation="DELETE",
        kind="ConfigMap",
        resource="configmaps",
        namespace=NAMESPACE,
        name=NAME,
        old_object=configmap({POLICY_KEY: TWO_TYPOS}),
    )

    assert response_of(client.post(PATH, json=sent))["allowed"] is True


def test_a_policy_over_the_size_limit_is_denied_without_being_read(client: TestClient) -> None:
    text = "# " + "x" * MAX_POLICY_BYTES + "\n" + default_policy_text()

    message = response_of(client.post(PATH, json=policy_review(text)))["status"]["message"]

    assert f"policies of at most {MAX_POLICY_BYTES:,}" in message


def test_a_denial_lists_at_most_the_limit_of_problems_and_counts_the_others(
    client: TestClient,
) -> None:
    extra = "".join(f"    typo{n}: 1\n" for n in range(PROBLEMS_LIMIT + 15))
    text = default_policy_text().replace("  inference:\n", "  inference:\n" + extra, 1)

    message = response_of(client.post(PATH, json=policy_review(text)))["status"]["message"]

    lines = message.splitlines()
    assert lines[0].endswith(f"({PROBLEMS_LIMIT + 15} problems):")
    assert len(lines) == 1 + PROBLEMS_LIMIT + 1
    assert lines[-1] == "and 15 more"
    assert len(message) <= DENIAL_LIMIT + 64


def test_a_hostile_policy_is_denied_in_few_words(client: TestClient) -> None:
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]
    for text in ["pools: " + "[" * 100_000, "\n".join(laughs)]:
        response = response_of(client.post(PATH, json=policy_review(text)))
        assert response["allowed"] is False
        assert len(response["status"]["message"]) < 600


def test_a_body_that_is_not_a_review_gets_400(client: TestClient) -> None:
    reply = client.post(PATH, content=b"not json", headers={"content-type": "application/json"})

    assert reply.status_code == 400


def test_a_body_over_the_cap_gets_413(engine: Engine) -> None:
    client = TestClient(create_app(lambda: engine, max_body_bytes=1024))
    reply = client.post(PATH, content=json.dumps(policy_review(default_policy_text())))

    assert reply.status_code == 413


def test_policy_reviews_are_counted_under_their_own_webhook(
    client: TestClient, metrics: Metrics
) -> None:
    client.post(PATH, json=policy_review(default_policy_text()))
    client.post(PATH, json=policy_review(TWO_TYPOS))

    def requests(decision: str) -> float | None:
        labels = {"webhook": "validate-policy", "operation": "CREATE", "decision": decision}
        return metrics.registry.get_sample_value(
            "gpu_admission_requests_total", {**labels, "rule": ""}
        )

    assert (requests("allowed"), requests("denied")) == (1, 1)


def repeated_device_classes(repeats: int) -> str:
    gpu, mig = ",".join(["a"] * repeats), ",".join(["b"] * repeats)
    return default_policy_text() + f"\ndra:\n  deviceClasses:\n    gpu: [{gpu}]\n    mig: [{mig}]\n"


@pytest.mark.parametrize("repeats", [9_000, 48_000])
def test_a_policy_of_thousands_of_repeated_names_is_denied_with_a_bounded_list(
    client: TestClient, repeats: int
) -> None:
    text = repeated_device_classes(repeats)

    started = time.perf_counter()
    response = response_of(client.post(PATH, json=policy_review(text)))
    print(f"{len(text):,} bytes judged in {time.perf_counter() - started:.2f} s")

    assert response["allowed"] is False
    lines = response["status"]["message"].splitlines()
    assert len(lines) <= 1 + PROBLEMS_LIMIT + 1
    if repeats < MAX_VALUES:  # read, then refused for each name listed twice
        count = int(lines[0].rsplit("(", 1)[1].split(" ")[0].replace(",", ""))
        assert count >= 2 * (repeats - 1)
        assert lines[-1] == f"and {count - PROBLEMS_LIMIT:,} more"
    else:  # refused before it is all read
        assert f"holds more than {MAX_VALUES:,} values" in lines[1]
    assert len(response["status"]["message"]) <= DENIAL_LIMIT + 64


def test_a_body_over_the_policy_routes_own_cap_gets_413(client: TestClient) -> None:
    review = policy_review(default_policy_text() + "# " + "x" * POLICY_BODY_BYTES + "\n")

    reply = client.post(PATH, content=json.dumps(review))

    assert reply.status_code == 413
    assert str(POLICY_BODY_BYTES) in reply.json()["error"]


def test_a_loop_sending_the_same_policy_costs_one_compilation(engine: Engine) -> None:
    app = create_app(lambda: engine)
    client = TestClient(app)
    route = next(r for r in app.router.routes if getattr(r, "path", "") == PATH)

    replies = [client.post(PATH, json=policy_review(TWO_TYPOS, uid=f"loop-{n}")) for n in range(20)]

    assert {response_of(reply)["allowed"] for reply in replies} == {False}
    assert {response_of(reply)["uid"] for reply in replies} == {f"loop-{n}" for n in range(20)}
    assert route.app.checks.compiled == 1  # type: ignore[attr-defined]


def test_the_same_policy_in_another_configmap_is_compiled_for_its_own_name(
    engine: Engine,
) -> None:
    client = TestClient(create_app(lambda: engine))
    first = policy_review(TWO_TYPOS)
    other = policy_review(TWO_TYPOS)
    other["request"]["name"] = other["request"]["object"]["metadata"]["name"] = "other"

    messages = [response_of(client.post(PATH, json=r))["status"]["message"] for r in (first, other)]

    assert f"{NAMESPACE}/{NAME}" in messages[0]
    assert f"{NAMESPACE}/other" in messages[1] and NAME not in messages[1]


def test_a_policy_is_compiled_in_the_review_worker_with_the_same_verdict(
    engine: Engine, worker: ReviewWorker
) -> None:
    client = TestClient(create_app(lambda: engine, worker=worker))

    broken = response_of(client.post(PATH, json=policy_review(TWO_TYPOS)))
    serving = response_of(client.post(PATH, json=policy_review(default_policy_text())))

    assert broken["allowed"] is False
    assert "gpusPerNod" in broken["status"]["message"]
    assert serving["allowed"] is True


# -- the webhook scope the policy needs, against the live configurations ---------------------

RENAMED = default_policy_text().replace(
    "workload: gpu-admission.io/workload", "workload: team.example/class"
)
ENDPOINT = Endpoint(ca_bundle="", service_name="gpu-admission", service_namespace=NAMESPACE)


def live(text: str = default_policy_text()) -> LiveWebhooks:
    """The live webhooks as installed from the policy `text`."""
    policy = load_policy_text(text, "installed.yaml")
    return LiveWebhooks.read(*render_webhook_configurations(policy, ENDPOINT))


def annotated(review: dict[str, Any], text: str) -> dict[str, Any]:
    """`review` with the annotation of the scope the policy `text` needs."""
    digest = scope_digest(load_policy_text(text, "annotated.yaml"))
    review["request"]["object"]["metadata"]["annotations"] = {SCOPE_ANNOTATION: digest}
    return review


def judged_by(engine: Engine, check: ScopeCheck, **options: Any) -> TestClient:
    return TestClient(create_app(lambda: engine, scope_judge=lambda: check, **options))


def test_a_policy_the_live_configurations_serve_is_admitted_without_a_warning(
    engine: Engine,
) -> None:
    client = judged_by(engine, ScopeCheck(live()))

    reply = client.post(PATH, json=policy_review(default_policy_text()))

    assert response_of(reply) == {"uid": "cm-uid", "allowed": True}


def test_a_policy_of_another_workload_label_is_refused_with_the_differences_and_the_fix(
    engine: Engine,
) -> None:
    client = judged_by(engine, ScopeCheck(live()))

    response = response_of(client.post(PATH, json=policy_review(RENAMED)))

    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith(
        f"the policy in ConfigMap {NAMESPACE}/{NAME} needs webhook configurations other than "
        "the live ones"
    )
    assert (
        "its objectSelector selects gpu-admission.io/workload, the policy's workload label "
        "is team.example/class"
    ) in message
    assert message.endswith(FIX)


def test_the_same_policy_carrying_the_digest_of_its_scope_is_admitted(engine: Engine) -> None:
    client = judged_by(engine, ScopeCheck(live()))

    reply = client.post(PATH, json=annotated(policy_review(RENAMED), RENAMED))

    assert response_of(reply) == {"uid": "cm-uid", "allowed": True}


def test_an_update_that_keeps_an_old_annotation_is_compared_with_the_live_configurations(
    engine: Engine,
) -> None:
    """`kubectl edit` of a ConfigMap a Helm release annotated keeps the annotation."""
    client = judged_by(engine, ScopeCheck(live()))
    review = annotated(policy_review(RENAMED, "UPDATE", old=default_policy_text()), RENAMED)
    review["request"]["object"]["data"][POLICY_KEY] = RENAMED.replace(
        "gpu: nvidia.com/gpu ", "gpu: amd.com/gpu ", 1
    )

    assert response_of(client.post(PATH, json=review))["allowed"] is False


def test_with_the_live_configurations_unknown_a_policy_is_admitted_with_a_warning(
    engine: Engine,
) -> None:
    client = judged_by(engine, ScopeCheck(None))

    response = response_of(client.post(PATH, json=policy_review(RENAMED)))

    assert response["allowed"] is True
    assert response["warnings"] == [NOT_COMPARED]


def test_a_broken_policy_is_refused_for_its_problems_before_its_scope(engine: Engine) -> None:
    client = judged_by(engine, ScopeCheck(None))

    response = response_of(client.post(PATH, json=policy_review(TWO_TYPOS)))

    assert response["allowed"] is False
    assert "does not load" in response["status"]["message"]


def test_a_verdict_is_kept_for_the_live_configurations_it_was_given(engine: Engine) -> None:
    judges = [ScopeCheck(live())]
    client = TestClient(create_app(lambda: engine, scope_judge=lambda: judges[0]))

    refused = response_of(client.post(PATH, json=policy_review(RENAMED)))
    judges[0] = ScopeCheck(live(RENAMED))  # the configurations were applied meanwhile
    admitted = response_of(client.post(PATH, json=policy_review(RENAMED)))

    assert (refused["allowed"], admitted["allowed"]) == (False, True)


def test_a_refusal_is_asked_again_of_the_configurations_read_afresh(engine: Engine) -> None:
    """A replica that read no configurations, just before they were applied with the
    policy, reads them again before it refuses the policy for them."""
    stale, fresh = ScopeCheck(LiveWebhooks.read(None, None)), ScopeCheck(live(RENAMED))
    reads: list[str] = []

    def read_again() -> ScopeCheck:
        reads.append("read")
        return fresh

    client = TestClient(
        create_app(lambda: engine, scope_judge=lambda: stale, fresh_scope_judge=read_again)
    )

    admitted = response_of(client.post(PATH, json=policy_review(RENAMED)))
    served = response_of(client.post(PATH, json=policy_review(default_policy_text())))

    assert admitted == {"uid": "cm-uid", "allowed": True}
    assert served["allowed"] is False  # the live ones are RENAMED's now
    assert reads == ["read", "read"]


def test_a_policy_the_fresh_configurations_still_refuse_is_refused(engine: Engine) -> None:
    client = TestClient(
        create_app(
            lambda: engine,
            scope_judge=lambda: ScopeCheck(live()),
            fresh_scope_judge=lambda: ScopeCheck(live()),
        )
    )

    refused = response_of(client.post(PATH, json=policy_review(RENAMED)))

    assert refused["allowed"] is False and refused["status"]["message"].endswith(FIX)


def test_the_scope_is_judged_in_the_review_worker_with_the_same_verdicts(
    engine: Engine, worker: ReviewWorker
) -> None:
    client = judged_by(engine, ScopeCheck(live()), worker=worker)

    refused = response_of(client.post(PATH, json=policy_review(RENAMED)))
    admitted = response_of(client.post(PATH, json=annotated(policy_review(RENAMED), RENAMED)))

    assert refused["allowed"] is False and refused["status"]["message"].endswith(FIX)
    assert admitted == {"uid": "cm-uid", "allowed": True}
