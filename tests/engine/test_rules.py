"""The rule registry (webhook/engine/rules/): every rule declared once, with its name, the pods
it is for and its checks; the engine reports each rule's outcome for a pod, and refuses a
policy whose `enforcement` names a rule the registry does not have.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import GPU_MODEL, container, mutated, pod, pod_create
from webhook.engine import RULES, Engine, RuleOutcome, Violation
from webhook.engine.pod import read_pod
from webhook.engine.rules import CLASS_PODS, EVERY_POD, Check, Registry, Rule, RuleContext, Step
from webhook.errors import PolicyError
from webhook.policy import Policy
from webhook.policy.load import default_policy_text, load_policy_text
from webhook.policy.schema import policy_schema

TOLERATES_TRAINING = {"key": "gpu-pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}  # fmt: skip


def policy_with(extra: str = "") -> Policy:
    return load_policy_text(default_policy_text() + "\n" + extra, "custom.yaml")


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(policy_with())


def outcomes_of(engine: Engine, obj: dict[str, Any]) -> dict[str, str]:
    return {o.rule: o.outcome for o in engine.rule_outcomes(read_pod(obj, engine.policy))}


def no_latest_image(context: RuleContext) -> list[Violation]:
    """A rule a cluster might add: images are pinned, not `:latest`."""
    return [
        Violation("pinned-image", f"container {c.name!r} runs a :latest image")
        for c in context.pod.all_containers()
        if str(c.raw.get("image", "")).endswith(":latest")
    ]


PINNED_IMAGE = Rule(
    "pinned-image",
    applies=EVERY_POD,
    checks=(Check(Step.CONTAINERS, EVERY_POD, no_latest_image),),
)


class TestAddingARule:
    def test_is_one_declaration_the_engine_judges_reports_and_lets_enforcement_name(
        self,
    ) -> None:
        rules = RULES.with_rules(PINNED_IMAGE)
        engine = Engine(policy_with("enforcement:\n  rules: {pinned-image: warn}\n"), rules)
        latest = pod(containers=[container(image="registry.example/app:latest")])

        decision = engine.validate(pod_create(latest))

        assert decision.allowed
        assert decision.warnings == (
            "gpu-admission: pinned-image: container 'app' runs a :latest image",
        )
        assert decision.rules[-1] == RuleOutcome(
            "pinned-image", "warn", ("container 'app' runs a :latest image",)
        )
        assert outcomes_of(engine, pod())["pinned-image"] == "pass"
        assert rules.names == (*RULES.names, "pinned-image")

    def test_its_name_is_in_the_schema_made_from_the_registry(self) -> None:
        schema = policy_schema(RULES.with_rules(PINNED_IMAGE).names)

        enforcement = schema["$defs"]["Enforcement"]["properties"]["rules"]
        assert enforcement["propertyNames"]["enum"][-1] == "pinned-image"

    def test_an_engine_without_it_refuses_a_policy_naming_it(self) -> None:
        policy = policy_with("enforcement:\n  rules: {pinned-image: warn}\n")

        with pytest.raises(PolicyError) as raised:
            Engine(policy)

        assert raised.value.path == "enforcement.rules.pinned-image"

    def test_its_violations_come_in_the_order_of_its_step(self) -> None:
        engine = Engine(policy_with(), RULES.with_rules(PINNED_IMAGE))
        obj = pod(containers=[container(image="app:latest", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])], priorityClassName="training-priority")  # fmt: skip

        violations = engine.pod_violations(read_pod(obj, engine.policy))

        assert [v.rule for v in violations] == ["visible-devices", "pinned-image", "priority-class"]

    def test_a_name_is_declared_once(self) -> None:
        with pytest.raises(ValueError, match="declared twice"):
            RULES.with_rules(Rule("gpu-count", applies=CLASS_PODS, checks=()))


class TestUnknownRuleNames:
    def test_a_policy_naming_no_rule_of_the_engine_is_refused_where_it_names_it(self) -> None:
        policy = policy_with("enforcement:\n  rules: {gpu-cout: warn}\n")

        with pytest.raises(PolicyError) as raised:
            Engine(policy)

        assert (raised.value.source, raised.value.path) == (
            "custom.yaml",
            "enforcement.rules.gpu-cout",
        )
        assert raised.value.reason == (
            "unknown rule 'gpu-cout'; rules: visible-devices, device-env, device-annotations, "
            "device-mounts, host-access, privileged-containers, workload-class, non-gpu-placement, "
            "pool-placement, gpu-model, gpu-quantity, gpu-count, mig-profile, gpu-sharing, priority-class, "
            "resource-claims, claims-not-judged"
        )

    def test_a_class_naming_no_rule_is_refused_at_the_class(self) -> None:
        policy = policy_with(
            "enforcement:\n  classes:\n    training:\n      rules: {nope: audit}\n"
        )

        with pytest.raises(PolicyError) as raised:
            Engine(policy)

        assert raised.value.path == "enforcement.classes.training.rules.nope"

    def test_the_first_unknown_name_in_the_policys_order_is_the_one_reported(self) -> None:
        policy = policy_with(
            "enforcement:\n  rules: {gpu-count: warn, first: warn}\n"
            "  classes:\n    training:\n      rules: {second: audit}\n"
        )

        with pytest.raises(PolicyError) as raised:
            Engine(policy)

        assert raised.value.path == "enforcement.rules.first"

    def test_the_policy_itself_leaves_rule_names_to_the_engine(self) -> None:
        policy = policy_with("enforcement:\n  rules: {pinned-image: warn}\n")

        assert policy.named_rules == (("enforcement.rules.pinned-image", "pinned-image"),)


class TestOutcomes:
    def test_a_class_pod_passes_every_rule_but_those_for_pods_of_no_class(
        self, engine: Engine
    ) -> None:
        obj = pod("inference", containers=[container(gpus=1)], priorityClassName="inference-priority", tolerations=[{"key": "gpu-pool", "operator": "Equal", "value": "inference", "effect": "NoSchedule"}])  # fmt: skip

        outcomes = outcomes_of(engine, obj)

        assert list(outcomes) == list(RULES.names)
        assert {rule for rule, outcome in outcomes.items() if outcome != "pass"} == {
            "non-gpu-placement"
        }
        assert outcomes["non-gpu-placement"] == "skip"

    def test_a_failed_rule_carries_its_messages_and_the_others_still_pass(
        self, engine: Engine
    ) -> None:
        obj = pod("training", containers=[container(gpus=9)], priorityClassName="training-priority", tolerations=[TOLERATES_TRAINING])  # fmt: skip

        [failed] = [o for o in engine.rule_outcomes(read_pod(obj, engine.policy)) if o.outcome != "pass" and o.outcome != "skip"]  # fmt: skip

        assert failed.rule == "gpu-count" and failed.outcome == "fail"
        assert failed.messages == ("pod requests 9 nvidia.com/gpu; the largest node in pool training has 8; split the work into pods of at most 8",)  # fmt: skip

    def test_a_pod_whose_label_names_no_class_is_told_only_that(self, engine: Engine) -> None:
        outcomes = outcomes_of(engine, pod("batch", priorityClassName="training-priority"))

        assert outcomes == {rule: "skip" for rule in RULES.names} | {
            "visible-devices": "pass",
            "device-env": "pass",
            "device-annotations": "pass",
            "device-mounts": "pass",
            "host-access": "pass",
            "privileged-containers": "pass",
            "workload-class": "fail",
        }

    def test_a_rule_broken_where_it_is_not_meant_to_pass_still_fails(self, engine: Engine) -> None:
        gpu_pod_of_no_class = pod(containers=[container(gpus=1)], nodeName="a100-0")

        outcomes = outcomes_of(engine, gpu_pod_of_no_class)

        assert (outcomes["workload-class"], outcomes["non-gpu-placement"]) == ("fail", "fail")

    def test_the_outcomes_give_warn_and_audit_as_the_policy_says(self) -> None:
        engine = Engine(policy_with("enforcement:\n  rules: {gpu-count: warn, priority-class: audit}\n"))  # fmt: skip
        obj = pod("training", containers=[container(gpus=9)], priorityClassName="inference-priority", tolerations=[TOLERATES_TRAINING])  # fmt: skip

        outcomes = outcomes_of(engine, obj)

        assert (outcomes["gpu-count"], outcomes["priority-class"]) == ("warn", "audit")

    def test_a_pod_create_comes_with_the_outcomes_of_its_rules(self, engine: Engine) -> None:
        obj = mutated(engine, pod("training", containers=[container(gpus=9)]))

        decision = engine.validate(pod_create(obj))

        assert not decision.allowed
        assert decision.rules == engine.rule_outcomes(read_pod(obj, engine.policy))
        assert {o.outcome for o in decision.rules} == {"pass", "fail", "skip"}

    def test_an_exempt_pod_has_every_rule_skipped(self) -> None:
        engine = Engine(policy_with("exemptions:\n  - namespaces: [ml]\n    reason: burn-in\n"))

        decision = engine.validate(pod_create(pod("training", containers=[container(gpus=9)])))

        assert decision.allowed
        assert decision.rules == tuple(RuleOutcome(rule, "skip") for rule in RULES.names)

    def test_only_a_pod_create_comes_with_outcomes(self, engine: Engine) -> None:
        update = pod_create(pod("inference"), operation="UPDATE", old_object=pod("inference"))

        assert engine.validate(update).rules == ()


class TestViolations:
    def test_are_listed_in_the_order_found_not_the_order_of_the_report(
        self, engine: Engine
    ) -> None:
        half = {"nvidia.com/gpu": "0.5"}
        obj = pod("inference", containers=[container(limits=half, requests=half)], tolerations=[TOLERATES_TRAINING], labels={GPU_MODEL: "V100"})  # fmt: skip

        violations = engine.pod_violations(read_pod(obj, engine.policy))

        assert [v.rule for v in violations] == ["gpu-quantity", "gpu-model", "pool-placement", "priority-class"]  # fmt: skip
        assert RULES.names.index("pool-placement") < RULES.names.index("gpu-quantity")

    def test_are_the_messages_of_the_outcomes(self, engine: Engine) -> None:
        obj = pod("training", containers=[container(gpus=9), container("cuda", env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])], priorityClassName="inference-priority")  # fmt: skip
        view = read_pod(obj, engine.policy)

        found = engine.findings(view)

        by_rule = {o.rule: o.messages for o in found.outcomes if o.messages}
        assert {v.rule: () for v in found.violations}.keys() == by_rule.keys()
        for rule, messages in by_rule.items():
            assert messages == tuple(v.message for v in found.violations if v.rule == rule)

    def test_a_rule_a_check_finds_but_the_registry_does_not_declare_is_reported_last(
        self,
    ) -> None:
        def stray(context: RuleContext) -> list[Violation]:
            return [Violation("stray", "found by a check of another rule")]

        rules = Registry([Rule("visible-devices", applies=EVERY_POD, checks=(Check(Step.CONTAINERS, EVERY_POD, stray),))])  # fmt: skip
        engine = Engine(policy_with(), rules)

        assert engine.rule_outcomes(read_pod(pod(), engine.policy)) == (
            RuleOutcome("visible-devices", "pass"),
            RuleOutcome("stray", "fail", ("found by a check of another rule",)),
        )


def test_a_check_shared_by_two_rules_runs_once() -> None:
    runs: list[str] = []

    def counted(context: RuleContext) -> list[Violation]:
        runs.append(context.pod.name)
        return []

    shared = Check(Step.CAPACITY, EVERY_POD, counted)
    rules = Registry([Rule("a", applies=EVERY_POD, checks=(shared,)), Rule("b", applies=EVERY_POD, checks=(shared,))])  # fmt: skip

    Engine(policy_with(), rules).rule_outcomes(read_pod(pod(), policy_with()))

    assert runs == ["p"]
