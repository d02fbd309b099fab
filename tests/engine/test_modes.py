"""Enforcement modes and exemptions (policy `enforcement` and `exemptions`).

`enforce` denies, `warn` admits with an AdmissionResponse warning, `audit` admits
and records the violation in auditAnnotations; a class's own modes win over the
policy's. Exempted pods skip validation, with the reason in auditAnnotations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import (
    GPU_MODEL,
    admitted,
    claim_objects,
    claim_spec,
    claim_template,
    claiming_container,
    container,
    from_templates,
    pod,
    pod_create,
)
from webhook.engine import RULES, AdmissionRequest, Decision, Engine
from webhook.engine.decision import WARNING_LIMIT, Violation, judge
from webhook.engine.dra.api import TEMPLATE
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.engine.rules.registry import ADVISORY_RULES
from webhook.errors import PolicyError
from webhook.policy.load import default_policy_text, load_policy_text

VISIBLE = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]


def engine_with(extra: str) -> Engine:
    """The default policy with `extra` (top-level YAML) appended."""
    return Engine(load_policy_text(default_policy_text() + "\n" + extra, "custom.yaml"))


def validated(engine: Engine, obj: dict[str, Any], **overrides: Any) -> Decision:
    return engine.validate(pod_create(obj, **overrides))


Judge = Callable[[Engine], Decision]

CLAIMING = pod(
    "inference", containers=[claiming_container()], resourceClaims=from_templates(gpu="t")
)
MEMORY = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
UNJUDGED = claim_objects(claim_template("t", claim_spec(selectors=[MEMORY])))
MISSING = ClaimObjects(missing=frozenset({ClaimSource(TEMPLATE, "t")}))

CASES: dict[str, Judge] = {
    "visible-devices": lambda e: validated(e, pod(containers=[container("cuda", env=VISIBLE)])),
    "device-env": lambda e: admitted(e, pod("training", containers=[container(env=[{"name": "NVIDIA_IMEX_CHANNELS", "value": "0"}])])),
    "device-annotations": lambda e: admitted(e, {**pod("training"), "metadata": {"name": "p", "namespace": "ml", "labels": {"gpu-admission.io/workload": "training"}, "annotations": {"cdi.k8s.io/x": "nvidia.com/gpu=all"}}}),
    "device-mounts": lambda e: admitted(e, pod("training", volumes=[{"name": "d", "hostPath": {"path": "/dev/nvidia0"}}])),
    "host-access": lambda e: admitted(e, pod("training", hostPID=True)),
    "privileged-containers": lambda e: admitted(e, pod("training", containers=[container(securityContext={"privileged": True})])),
    "workload-class": lambda e: validated(e, pod("batch")),
    "non-gpu-placement": lambda e: validated(e, pod(tolerations=[{"operator": "Exists"}])),
    "pool-placement": lambda e: admitted(e, pod("inference", nodeSelector={"gpu-pool": "training"})),
    "gpu-model": lambda e: admitted(e, pod("inference", labels={GPU_MODEL: "V100"})),
    "gpu-quantity": lambda e: admitted(e, pod("training", containers=[container(limits={"nvidia.com/gpu": "0.5"}, requests={"nvidia.com/gpu": "0.5"})])),
    "gpu-count": lambda e: admitted(e, pod("training", containers=[container(gpus=9)])),
    "mig-profile": lambda e: admitted(e, pod("training", containers=[container(limits={"nvidia.com/mig-1g.5gb": "1"})])),
    "gpu-sharing": lambda e: admitted(e, {**pod("training"), "metadata": {"name": "p", "namespace": "ml", "labels": {"gpu-admission.io/workload": "training"}, "annotations": {"gpu-fraction": "0.5"}}}),
    "priority-class": lambda e: admitted(e, pod("training", priorityClassName="inference-priority", priority=1000000)),
    "resource-claims": lambda e: admitted(e, CLAIMING, claims=MISSING),
    "claims-not-judged": lambda e: admitted(e, CLAIMING, claims=UNJUDGED),
}  # fmt: skip
ENFORCEABLE = [rule for rule in RULES.names if rule not in ADVISORY_RULES]


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == set(RULES.names)


@pytest.fixture(scope="module")
def default_engine() -> Engine:
    return engine_with("")


class TestRuleModes:
    @pytest.mark.parametrize("rule", ENFORCEABLE)
    def test_by_default_every_rule_is_enforced(self, default_engine: Engine, rule: str) -> None:
        decision = CASES[rule](default_engine)

        assert not decision.allowed
        assert rule in {v.rule for v in decision.violations}
        assert {v.mode for v in decision.violations} == {"enforce"}
        assert decision.warnings == () and dict(decision.audit_annotations) == {}

    @pytest.mark.parametrize("rule", sorted(ADVISORY_RULES))
    def test_a_rule_saying_what_was_not_judged_warns_even_when_enforced(
        self, default_engine: Engine, rule: str
    ) -> None:
        decision = CASES[rule](engine_with(f"enforcement:\n  rules:\n    {rule}: enforce\n"))

        assert {v.mode for v in decision.violations if v.rule == rule} == {"warn"}
        assert any(w.startswith(f"gpu-admission: {rule}: ") for w in decision.warnings)

    @pytest.mark.parametrize("rule", RULES.names)
    def test_a_rule_in_warn_mode_admits_with_a_short_warning(
        self, default_engine: Engine, rule: str
    ) -> None:
        decision = CASES[rule](engine_with(f"enforcement:\n  rules:\n    {rule}: warn\n"))

        others = {v.rule for v in CASES[rule](default_engine).violations} - {rule}
        assert decision.allowed == (not others), decision.message
        assert {v.mode for v in decision.violations if v.rule == rule} == {"warn"}
        assert {v.mode for v in decision.violations if v.rule != rule} <= {"enforce"}
        assert decision.warnings
        for warning in decision.warnings:
            assert warning.startswith(f"gpu-admission: {rule}: ")
            assert len(warning) <= WARNING_LIMIT
        assert rule not in decision.message
        assert dict(decision.audit_annotations) == {}

    @pytest.mark.parametrize("rule", RULES.names)
    def test_a_rule_in_audit_mode_admits_and_records_it(
        self, default_engine: Engine, rule: str
    ) -> None:
        decision = CASES[rule](engine_with(f"enforcement:\n  rules:\n    {rule}: audit\n"))

        others = {v.rule for v in CASES[rule](default_engine).violations} - {rule}
        assert decision.allowed == (not others), decision.message
        audited = [v.message for v in decision.violations if v.rule == rule]
        assert {v.mode for v in decision.violations if v.rule == rule} == {"audit"}
        assert dict(decision.audit_annotations) == {rule: "; ".join(dict.fromkeys(audited))}
        assert decision.warnings == ()

    def test_the_default_mode_applies_to_every_rule_not_named(self) -> None:
        engine = engine_with(
            "enforcement:\n  default: warn\n  rules:\n    priority-class: enforce\n"
        )

        assert CASES["gpu-count"](engine).allowed
        assert CASES["pool-placement"](engine).allowed
        assert not CASES["priority-class"](engine).allowed

    def test_a_denial_lists_only_the_enforced_violations_and_warns_of_the_others(self) -> None:
        engine = engine_with("enforcement:\n  rules:\n    gpu-count: warn\n")
        obj = pod("training", containers=[container(gpus=9)], priorityClassName="inference-priority", priority=1000000)  # fmt: skip

        decision = admitted(engine, obj)

        assert not decision.allowed
        assert "inference-priority" in decision.message
        assert "nvidia.com/gpu" not in decision.message
        assert [w.split(": ")[1] for w in decision.warnings] == ["gpu-count"]
        assert {(v.rule, v.mode) for v in decision.violations} == {
            ("gpu-count", "warn"),
            ("priority-class", "enforce"),
        }


class TestClassModes:
    def test_a_class_mode_applies_to_that_class_only(self) -> None:
        engine = engine_with(
            "enforcement:\n  classes:\n    training:\n      rules: {gpu-count: warn}\n"
        )

        training = admitted(engine, pod("training", containers=[container(gpus=9)]))
        inference = admitted(engine, pod("inference", containers=[container(gpus=9)]))

        assert training.allowed and training.warnings
        assert not inference.allowed
        assert [v.mode for v in inference.violations] == ["enforce"]

    def test_a_class_mode_wins_over_the_policys_rule_mode(self) -> None:
        engine = engine_with(
            "enforcement:\n"
            "  rules: {gpu-count: audit}\n"
            "  classes:\n    training:\n      rules: {gpu-count: enforce}\n"
        )

        training = admitted(engine, pod("training", containers=[container(gpus=9)]))
        inference = admitted(engine, pod("inference", containers=[container(gpus=9)]))

        assert not training.allowed
        assert inference.allowed and list(inference.audit_annotations) == ["gpu-count"]

    def test_a_workload_template_takes_its_classs_mode(self) -> None:
        engine = engine_with(
            "enforcement:\n  classes:\n    training:\n      rules: {gpu-count: warn}\n"
        )
        obj = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "big"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"gpu-admission.io/workload": "training"}},
                    "spec": {"containers": [container(limits={"nvidia.com/gpu": "9"})]},
                }
            },
        }

        decision = engine.validate(workload_request(obj))

        assert decision.allowed, decision.message
        assert decision.warnings and decision.warnings[0].startswith("gpu-admission: gpu-count: ")

    def test_a_workload_denial_names_only_templates_with_enforced_violations(self) -> None:
        engine = engine_with("enforcement:\n  rules: {gpu-count: warn}\n")
        template = {
            "metadata": {"labels": {"gpu-admission.io/workload": "training"}},
            "spec": {
                "priorityClassName": "inference-priority",
                "containers": [container(limits={"nvidia.com/gpu": "9"})],
            },
        }
        obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": template}}  # fmt: skip

        decision = engine.validate(workload_request(obj))

        assert not decision.allowed
        assert decision.message.startswith("gpu-admission denied Deployment 'ml/d' template")
        assert "inference-priority" in decision.message
        assert "nvidia.com/gpu" not in decision.message
        assert decision.warnings


class TestMutateOff:
    def test_a_class_with_mutation_off_is_not_mutated_and_is_judged_as_written(self) -> None:
        engine = engine_with("enforcement:\n  classes:\n    inference:\n      mutate: false\n")

        assert engine.mutate(pod_create(pod("inference"))).patch == ()
        assert engine.mutate(pod_create(pod("training"))).patch != ()
        decision = admitted(engine, pod("inference"))
        assert not decision.allowed
        assert "priority-class" in {v.rule for v in decision.violations}

    def test_mutation_stays_on_by_default(self, default_engine: Engine) -> None:
        assert default_engine.mutate(pod_create(pod("inference"))).patch != ()


NINE = pod("training", containers=[container(gpus=9)], labels={"team": "legacy"})


class TestExemptions:
    def test_a_namespace_exemption_skips_validation_and_records_the_reason(self) -> None:
        engine = engine_with("exemptions:\n  - namespaces: [ml]\n    reason: burn-in tests\n")

        decision = admitted(engine, NINE)

        assert decision.allowed
        assert dict(decision.audit_annotations) == {"exemption": "burn-in tests"}
        assert decision.violations == ()
        other = engine.validate(pod_create(NINE, namespace="research"))
        assert not other.allowed

    def test_exempted_pods_are_still_mutated(self) -> None:
        engine = engine_with("exemptions:\n  - namespaces: [ml]\n    reason: burn-in tests\n")

        assert engine.mutate(pod_create(pod("training"))).patch != ()

    def test_a_label_exemption_applies_to_pods_with_the_label(self) -> None:
        engine = engine_with(
            "exemptions:\n  - podLabels: {team: legacy}\n    reason: legacy scheduler\n"
        )

        assert dict(admitted(engine, NINE).audit_annotations) == {"exemption": "legacy scheduler"}
        unlabelled = pod("training", containers=[container(gpus=9)], labels={"team": "new"})
        assert not admitted(engine, unlabelled).allowed

    def test_namespaces_and_labels_together_must_both_match(self) -> None:
        engine = engine_with(
            "exemptions:\n"
            "  - namespaces: [research]\n    podLabels: {team: legacy}\n    reason: legacy\n"
        )

        assert not admitted(engine, NINE).allowed  # in ml
        assert engine.validate(pod_create(NINE, namespace="research")).allowed

    def test_there_is_no_built_in_exemption_label(self, default_engine: Engine) -> None:
        labels = {"gpu-admission.io/exempt": "true", "gpu-admission.io/exemption": "true"}
        obj = pod("training", containers=[container(gpus=9)], labels=labels)

        assert not admitted(default_engine, obj).allowed

    def test_a_workload_template_with_the_label_is_exempt(self) -> None:
        engine = engine_with(
            "exemptions:\n  - podLabels: {team: legacy}\n    reason: legacy scheduler\n"
        )
        obj = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "big"},
            "spec": {"template": {"metadata": {"labels": NINE["metadata"]["labels"]}, "spec": NINE["spec"]}},
        }  # fmt: skip

        decision = engine.validate(workload_request(obj))

        assert decision.allowed
        assert dict(decision.audit_annotations) == {"exemption": "legacy scheduler"}


class TestPolicyErrors:
    @pytest.mark.parametrize(
        ("extra", "path", "reason"),
        [
            ("enforcement:\n  rules: {gpu-cout: warn}\n", "enforcement.rules.gpu-cout", "unknown rule 'gpu-cout'"),
            ("enforcement:\n  classes:\n    training:\n      rules: {nope: audit}\n", "enforcement.classes.training.rules.nope", "unknown rule 'nope'"),
            ("enforcement:\n  classes:\n    batch: {mutate: false}\n", "enforcement.classes.batch", "unknown class 'batch'"),
            ("enforcement:\n  rules: {gpu-count: deny}\n", "enforcement.rules.gpu-count", "must be 'enforce', 'warn' or 'audit', not 'deny'"),
            ("enforcement:\n  default: strict\n", "enforcement.default", "must be 'enforce', 'warn' or 'audit', not 'strict'"),
            ("exemptions:\n  - reason: everything\n", "exemptions[0]", "would exempt every pod"),
            ("exemptions:\n  - namespaces: [ml]\n", "exemptions[0].reason", "missing required key 'reason'"),
            ("exemptions:\n  - namespaces: [ml]\n    reason: ''\n", "exemptions[0].reason", "must not be empty"),
        ],
        ids=["rule", "class-rule", "class", "mode", "default", "blanket", "no-reason", "empty-reason"],
    )  # fmt: skip
    def test_a_bad_enforcement_or_exemption_names_the_field(
        self, extra: str, path: str, reason: str
    ) -> None:
        with pytest.raises(PolicyError) as raised:
            engine_with(extra)

        assert raised.value.path == path
        assert reason in raised.value.reason


def test_a_long_warning_is_cut_short_with_an_ellipsis() -> None:
    decision = judge([Violation("gpu-count", "x" * 300, "warn")], "subject")

    assert decision.allowed
    (warning,) = decision.warnings
    assert len(warning) == WARNING_LIMIT == 256
    assert warning.startswith("gpu-admission: gpu-count: xxx") and "x..." in warning


def workload_request(obj: dict[str, Any]) -> AdmissionRequest:
    group, _, version = obj["apiVersion"].rpartition("/")
    return AdmissionRequest(
        uid="uid-1",
        operation="CREATE",
        group=group,
        version=version,
        kind=obj["kind"],
        resource=obj["kind"].lower() + "s",
        subresource="",
        namespace="ml",
        name=obj["metadata"]["name"],
        object=obj,
    )
