"""The audit's judging and adding up (webhook.offline.audit): plain dicts in, findings out."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    claim_objects,
    claim_spec,
    claim_template,
    claiming_pod,
    container,
    dra_engine,
    pod,
)
from webhook.engine import Engine, RuleOutcome
from webhook.engine.dra.claims import ClaimSource
from webhook.engine.dra.pod_claims import ClaimObjects
from webhook.engine.templates import CONTROLLER_KINDS, POD, TemplateKind, template_kinds
from webhook.offline.audit import (
    NAME_LIMIT,
    TEMPLATE_LIMIT,
    TOO_LARGE,
    AuditSummary,
    Finding,
    Owner,
    Subject,
    as_created,
    as_owner,
    judge_object,
    judged_owner,
    left_to_owner,
    subject_named,
    subject_of,
    too_large,
)
from webhook.offline.documents import Document
from webhook.offline.evaluation import evaluate
from webhook.policy import load_policy_text
from webhook.policy.load import default_policy_text

DEPLOYMENT = next(k for k in CONTROLLER_KINDS if k.kind == "Deployment")
CRONJOB = next(k for k in CONTROLLER_KINDS if k.kind == "CronJob")


def stored(obj: dict[str, Any], node: str | None = None, by_hand: bool = False) -> dict[str, Any]:
    """`obj` as kube-apiserver stores it once running: uid, status, managedFields."""
    fields: dict[str, Any] = {"f:spec": {"f:containers": {}}}
    if by_hand:
        fields["f:spec"]["f:nodeName"] = {}
    result = {
        **obj,
        "metadata": {
            **obj["metadata"],
            "uid": "0000-1",
            "managedFields": [
                {"manager": "kubectl", "operation": "Update", "fieldsV1": fields},
                {"manager": "kubelet", "operation": "Update", "subresource": "status",
                 "fieldsV1": {"f:status": {}}},
            ],
        },
        "status": {"phase": "Pending"},
    }  # fmt: skip
    if node is not None:
        result["spec"] = {**obj["spec"], "nodeName": node}
    return result


def workload(kind: str, template: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": template}
    if kind == "CronJob":
        spec = {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}
    group = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    return {
        "apiVersion": group,
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ml", "uid": "w-1", **metadata},
        "spec": spec,
    }


def outcomes(finding: Finding) -> dict[str, str]:
    return {r.rule: r.outcome for r in finding.rules}


class TestAsCreated:
    def test_the_status_is_set_aside(self) -> None:
        assert "status" not in as_created(stored(pod("inference")))

    def test_the_node_the_scheduler_bound_it_to_is_set_aside(self) -> None:
        assert "nodeName" not in as_created(stored(pod("inference"), node="gpu-1"))["spec"]

    def test_a_node_named_by_its_creator_is_kept(self) -> None:
        created = as_created(stored(pod("inference"), node="gpu-1", by_hand=True))

        assert created["spec"]["nodeName"] == "gpu-1"

    def test_the_stored_pod_is_not_changed(self) -> None:
        running = stored(pod("inference"), node="gpu-1")

        as_created(running)

        assert running["spec"]["nodeName"] == "gpu-1" and "status" in running


class TestJudgeObject:
    def test_a_pod_never_mutated_is_judged_with_the_mutation_of_its_create(
        self, engine: Engine
    ) -> None:
        [finding] = judge_object(engine, stored(pod("inference", name="llm")), POD)

        assert finding.verdict == "passed"
        assert outcomes(finding)["priority-class"] == "pass"
        assert finding.subject == Subject("ml", "v1", "Pod", "llm", "0000-1")

    def test_a_pod_breaking_an_enforced_rule_is_denied_with_the_message_of_its_create(
        self, engine: Engine
    ) -> None:
        peek = pod(containers=[container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])])

        [finding] = judge_object(engine, stored(peek), POD)

        assert finding.verdict == "denied"
        assert outcomes(finding)["visible-devices"] == "fail"
        assert finding.message.startswith("gpu-admission denied pod 'ml/p'")

    def test_a_pod_bound_by_the_scheduler_to_a_gpu_node_is_not_judged_for_that_node(
        self, engine: Engine
    ) -> None:
        cpu = pod(containers=[container()])

        [scheduled] = judge_object(engine, stored(cpu, node="gpu-node-7"), POD)
        [by_hand] = judge_object(engine, stored(cpu, node="gpu-node-7", by_hand=True), POD)

        assert scheduled.verdict == "passed"
        assert by_hand.verdict == "denied"

    @pytest.mark.parametrize(
        ("mode", "verdict"), [("warn", "warned"), ("audit", "audited"), ("enforce", "denied")]
    )
    def test_a_rule_the_policy_only_warns_of_or_audits_admits_with_that_verdict(
        self, mode: str, verdict: str
    ) -> None:
        text = default_policy_text() + f"\nenforcement:\n  rules: {{gpu-count: {mode}}}\n"
        engine = Engine(load_policy_text(text, "test"))
        huge = pod("training", containers=[container(gpus=64)])

        [finding] = judge_object(engine, stored(huge), POD)

        assert finding.verdict == verdict
        assert outcomes(finding)["gpu-count"] == {"warned": "warn", "audited": "audit"}.get(
            verdict, "fail"
        )

    def test_an_exempted_pod_is_admitted_unjudged_with_the_reason(self) -> None:
        text = default_policy_text() + (
            "\nexemptions:\n  - {namespaces: [ml], reason: legacy team}\n"
        )
        engine = Engine(load_policy_text(text, "test"))

        [finding] = judge_object(engine, stored(pod(containers=[container(gpus=1)])), POD)

        assert (finding.verdict, finding.exemption) == ("exempted", "legacy team")
        assert set(outcomes(finding).values()) == {"skip"}

    def test_a_workload_is_judged_by_its_template_as_the_pod_its_controller_creates(
        self, engine: Engine
    ) -> None:
        template = {"metadata": {"labels": {}}, "spec": {"containers": [container(gpus=1)]}}

        [finding] = judge_object(engine, workload("CronJob", template), CRONJOB)

        assert finding.subject.template == "spec.jobTemplate.spec.template"
        assert finding.verdict == "denied"
        assert outcomes(finding)["workload-class"] == "fail"

    @pytest.mark.parametrize(
        ("kind", "path"),
        [(CRONJOB, "spec.jobTemplate.spec.template"), (DEPLOYMENT, "spec.template")],
        ids=["CronJob", "Deployment"],
    )
    def test_a_denied_template_is_worded_as_check_and_the_webhook_word_it(
        self, engine: Engine, kind: TemplateKind, path: str
    ) -> None:
        template = {"metadata": {"labels": {}}, "spec": {"containers": [container(gpus=1)]}}
        obj = workload(kind.kind, template)

        [finding] = judge_object(engine, obj, kind)
        [evaluation] = evaluate(engine, [Document("m.yaml", 1, obj)]).pods

        assert finding.message == evaluation.message
        assert finding.message.startswith(
            f"gpu-admission denied {kind.kind} 'ml/w' template ({path}): "
        )

    def test_a_workload_with_two_denied_templates_names_both_in_each_finding(
        self, engine: Engine
    ) -> None:
        template = {"metadata": {"labels": {}}, "spec": {"containers": [container(gpus=1)]}}
        replicas = {"Master": {"template": template}, "Worker": {"template": template}}
        obj = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "w", "namespace": "ml", "uid": "w-1"},
            "spec": {"pytorchReplicaSpecs": replicas},
        }
        kind = next(k for k in engine.kinds if k.kind == "PyTorchJob")

        master, worker = judge_object(engine, obj, kind)
        checked = evaluate(engine, [Document("m.yaml", 1, obj)]).pods

        assert master.message == worker.message == checked[0].message == checked[1].message
        assert "template (spec.pytorchReplicaSpecs.Master.template): " in master.message
        assert "; template (spec.pytorchReplicaSpecs.Worker.template): " in master.message

    def test_a_malformed_workload_is_denied_with_the_reason_and_no_rules(
        self, engine: Engine
    ) -> None:
        broken = {**workload("Deployment", {}), "spec": {"template": ["not", "a", "mapping"]}}

        [finding] = judge_object(engine, broken, DEPLOYMENT)

        assert finding.verdict == "denied"
        assert finding.rules == ()
        assert finding.message.startswith("malformed object: ")


@pytest.fixture(scope="module")
def dra() -> Engine:
    """Inference on DRA pools, training on pools of both kinds."""
    return dra_engine()


class TestClaimsOfDraPods:
    """A pod claiming GPUs is judged by the templates its claims name, as read."""

    def test_a_pod_whose_template_asks_for_one_gpu_passes_unwarned(self, dra: Engine) -> None:
        asked: list[tuple[str, tuple[ClaimSource, ...]]] = []

        def claims_of(namespace: str, sources: tuple[ClaimSource, ...]) -> ClaimObjects:
            asked.append((namespace, sources))
            return claim_objects(claim_template("one-gpu"))

        [finding] = judge_object(dra, stored(claiming_pod()), POD, claims_of=claims_of)

        assert finding.verdict == "passed"
        assert outcomes(finding)["resource-claims"] == "pass"
        assert asked == [("ml", (ClaimSource("ResourceClaimTemplate", "one-gpu"),))]

    def test_a_template_asking_more_than_any_node_holds_denies_the_pod(self, dra: Engine) -> None:
        nine = claim_objects(claim_template("one-gpu", claim_spec(count=9)))

        [finding] = judge_object(dra, stored(claiming_pod()), POD, claims_of=lambda *_: nine)

        assert finding.verdict == "denied"
        assert "claim 'gpu' (ResourceClaimTemplate 'one-gpu')" in finding.message

    def test_a_template_deleted_since_denies_the_pod_as_its_create_would_be_today(
        self, dra: Engine
    ) -> None:
        gone = ClaimObjects(missing=frozenset({ClaimSource("ResourceClaimTemplate", "one-gpu")}))

        [finding] = judge_object(dra, stored(claiming_pod()), POD, claims_of=lambda *_: gone)

        assert finding.verdict == "denied"
        assert "does not exist" in finding.message

    def test_claims_not_read_are_not_judged_and_the_pod_is_warned(self, dra: Engine) -> None:
        [finding] = judge_object(dra, stored(claiming_pod()), POD)

        assert finding.verdict == "warned"
        assert outcomes(finding)["claims-not-judged"] == "warn"

    def test_a_workload_template_is_judged_by_the_templates_it_names(self, dra: Engine) -> None:
        template = {k: v for k, v in claiming_pod().items() if k in ("metadata", "spec")}

        [finding] = judge_object(
            dra,
            workload("Deployment", template),
            DEPLOYMENT,
            claims_of=lambda *_: claim_objects(claim_template("one-gpu")),
        )

        assert finding.verdict == "passed"

    def test_a_pod_without_claims_reads_nothing(self, dra: Engine) -> None:
        def claims_of(namespace: str, sources: tuple[ClaimSource, ...]) -> ClaimObjects:
            raise AssertionError("read for a pod without claims")

        [finding] = judge_object(dra, stored(pod("training")), POD, claims_of=claims_of)

        assert finding.verdict == "passed"


class TestLeftToOwner:
    @pytest.mark.parametrize(
        ("owner", "left"),
        [
            ({"apiVersion": "apps/v1", "kind": "Deployment", "controller": True}, True),
            ({"apiVersion": "batch/v1", "kind": "CronJob", "controller": True}, True),
            ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "controller": True}, True),
            ({"apiVersion": "apps/v1", "kind": "Deployment"}, False),
            ({"apiVersion": "example.com/v1", "kind": "Deployment", "controller": True}, False),
            ({"apiVersion": "v1", "kind": "Pod", "controller": True}, False),
        ],
    )  # fmt: skip
    def test_a_workload_controlled_by_a_kind_judged_too_and_seen_is_left_to_it(
        self, engine: Engine, owner: dict[str, Any], left: bool
    ) -> None:
        kinds = template_kinds(engine.policy)
        replica_set = workload("ReplicaSet", {}, ownerReferences=[{"name": "o", "uid": "o-1", **owner}])  # fmt: skip
        group = owner["apiVersion"].split("/")[0] if "/" in owner["apiVersion"] else ""
        seen = {Owner("ml", group, owner["kind"], "o-1")}

        assert left_to_owner(replica_set, kinds, seen) is left

    def test_an_owner_never_seen_is_no_reason_to_skip_a_workload(self, engine: Engine) -> None:
        kinds = template_kinds(engine.policy)
        fake = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "ghost", "uid": "made-up", "controller": True}  # fmt: skip
        cronjob = workload("CronJob", {}, ownerReferences=[fake])

        assert judged_owner(cronjob, kinds) == Owner("ml", "apps", "Deployment", "made-up")
        assert left_to_owner(cronjob, kinds, set()) is False
        assert (
            left_to_owner(cronjob, kinds, {Owner("ml", "apps", "Deployment", "another")}) is False
        )

    def test_an_owner_of_the_same_uid_in_another_namespace_or_of_another_kind_is_not_the_owner(
        self, engine: Engine
    ) -> None:
        kinds = template_kinds(engine.policy)
        owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "d-1", "controller": True}  # fmt: skip
        replica_set = workload("ReplicaSet", {}, ownerReferences=[owner])

        assert not left_to_owner(replica_set, kinds, {Owner("other", "apps", "Deployment", "d-1")})
        assert not left_to_owner(replica_set, kinds, {Owner("ml", "apps", "StatefulSet", "d-1")})
        assert left_to_owner(replica_set, kinds, {Owner("ml", "apps", "Deployment", "d-1")})

    def test_an_owner_reference_without_a_uid_is_never_trusted(self, engine: Engine) -> None:
        owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "controller": True}
        replica_set = workload("ReplicaSet", {}, ownerReferences=[owner])

        assert not left_to_owner(replica_set, template_kinds(engine.policy), {Owner("ml", "apps", "Deployment", "")})  # fmt: skip

    def test_a_listed_object_is_the_owner_its_dependents_name(self) -> None:
        assert as_owner(workload("Deployment", {}), DEPLOYMENT) == Owner("ml", "apps", "Deployment", "w-1")  # fmt: skip


class TestTooLarge:
    def test_an_object_too_large_is_warned_of_with_its_size_and_the_cap(self) -> None:
        subject = subject_named("ml", "apps/v1", "ReplicaSet", "huge", "u-1")

        finding = too_large(subject, 4_000_000, 3_145_728)

        assert finding.verdict == "warned"
        assert [(r.rule, r.outcome) for r in finding.rules] == [(TOO_LARGE, "warn")]
        assert "too large to be judged" in finding.message
        assert "4,000,000 characters" in finding.message and "3,145,728" in finding.message

    def test_it_counts_under_its_own_rule_in_the_summary(self) -> None:
        summary = AuditSummary()

        summary.add(too_large(subject_named("ml", "v1", "Pod", "p"), 10, 5))

        assert summary.by_rule == {TOO_LARGE: {"warn": 1}}
        assert summary.verdicts["warned"] == 1


class TestStringsAreCut:
    def test_a_name_of_any_length_is_cut_saying_how_long_it_was(self) -> None:
        obj = workload("Deployment", {}, name="n" * 1_000_000)

        subject = subject_of(obj)

        assert len(subject.name) < NAME_LIMIT + 40
        assert subject.name.endswith("(1,000,000 characters)")

    def test_a_custom_kinds_replica_key_of_any_length_is_cut_in_the_template_path(
        self, engine: Engine
    ) -> None:
        [kind] = [k for k in engine.kinds if k.kind == "PyTorchJob"]
        key = "K" * (1024 * 1024)
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "j", "namespace": "ml", "uid": "j-1"},
            "spec": {
                "pytorchReplicaSpecs": {key: {"template": {"spec": {"containers": [container()]}}}}
            },
        }

        [finding] = judge_object(engine, job, kind)

        assert len(finding.subject.template) < TEMPLATE_LIMIT + 40
        assert finding.subject.template.startswith("spec.pytorchReplicaSpecs.KKK")


class TestAuditSummary:
    def test_findings_add_up_by_verdict_rule_and_namespace(self) -> None:
        summary = AuditSummary()
        passed = (RuleOutcome("gpu-count", "pass"), RuleOutcome("mig-profile", "skip"))
        failed = (RuleOutcome("gpu-count", "fail", ("too many",)), RuleOutcome("mig-profile", "pass"))  # fmt: skip

        summary.add(Finding(Subject("a", "v1", "Pod", "x"), "passed", rules=passed))
        summary.add(Finding(Subject("a", "v1", "Pod", "y"), "denied", "no", failed))
        summary.add(Finding(Subject("b", "apps/v1", "Deployment", "d", template="spec.template"), "denied", "no", failed))  # fmt: skip
        summary.include_namespace("c")

        assert summary.judged == 3
        assert summary.denied == 2
        assert summary.by_rule == {
            "gpu-count": {"pass": 1, "fail": 2},
            "mig-profile": {"skip": 1, "pass": 2},
        }
        assert summary.by_namespace == {
            "a": {"passed": 1, "denied": 1},
            "b": {"denied": 1},
            "c": {},
        }
        assert summary.object_counts() == {"Deployment": 1, "Pod": 2}
