"""Offline evaluation (webhook/offline/): manifests read, pods judged as the cluster would, results shown."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import GPU_MODEL, container, pod
from webhook.engine import RULES, Engine
from webhook.engine.placement_exclusions import REQUIRED_TERMS as TERMS
from webhook.offline.cases import Case, case_problems, read_case, run_cases
from webhook.offline.documents import Document, ManifestError, read_documents, read_manifest_files
from webhook.offline.evaluation import PodEvaluation, Report, evaluate
from webhook.offline.fragments import mismatch
from webhook.offline.prose import explain
from webhook.offline.report_data import report_data
from webhook.offline.text import report_text
from webhook.policy.load import default_policy_text, load_policy_text

REPOSITORY = Path(__file__).resolve().parents[2]
SHIPPED_CASES = REPOSITORY / "policies" / "tests"

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-server
  namespace: serving
spec:
  selector:
    matchLabels: {app: llm-server}
  template:
    metadata:
      labels: {app: llm-server, gpu-admission.io/workload: inference}
    spec:
      containers:
        - name: server
          image: registry.example/llm-server:1.4
          resources:
            limits: {nvidia.com/gpu: 1}
"""

CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {a: b}
"""


def document(obj: dict[str, Any], source: str = "manifest.yaml", line: int = 1) -> Document:
    return Document(source, line, obj)


def evaluated(engine: Engine, obj: dict[str, Any]) -> PodEvaluation:
    [evaluation] = evaluate(engine, [document(obj)]).pods
    return evaluation


def outcomes(evaluation: PodEvaluation) -> dict[str, str]:
    return {r.rule: r.outcome for r in evaluation.rules}


def reachable(evaluation: PodEvaluation) -> dict[str, str]:
    return {landing.describe: landing.reachable for landing in evaluation.landings}


def reasons(evaluation: PodEvaluation, where: str) -> tuple[str, ...]:
    [landing] = [landing for landing in evaluation.landings if landing.describe == where]
    return landing.reasons


class TestReadingManifests:
    def test_each_document_is_an_object_with_the_line_where_it_starts(self) -> None:
        text = f"# a comment\n---\n{DEPLOYMENT}---\n---\n{CONFIG_MAP}"
        documents = read_documents(text, "app.yaml")
        assert [(d.source, d.line, d.object["kind"]) for d in documents] == [
            ("app.yaml", 3, "Deployment"),
            ("app.yaml", 22, "ConfigMap"),
        ]

    def test_a_list_stands_for_its_items(self) -> None:
        text = yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [pod("inference", name="a"), pod(name="b")],
            }
        )
        assert [d.object["metadata"]["name"] for d in read_documents(text, "list.yaml")] == [
            "a",
            "b",
        ]

    def test_timestamps_stay_the_strings_kubernetes_reads(self) -> None:
        [doc] = read_documents(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  creationTimestamp: 2024-05-01T10:00:00Z\n",
            "p.yaml",
        )
        assert doc.object["metadata"]["creationTimestamp"] == "2024-05-01T10:00:00Z"

    def test_a_yaml_error_names_the_file_and_line(self) -> None:
        with pytest.raises(ManifestError) as caught:
            read_documents(f"{CONFIG_MAP}---\nkind: Pod\nspec: [a\n", "broken.yaml")
        assert (caught.value.source, caught.value.line) == ("broken.yaml", 8)
        assert str(caught.value).startswith("broken.yaml:8: not valid YAML: ")

    def test_a_key_given_twice_is_an_error_at_its_line_not_a_silent_overwrite(self) -> None:
        with pytest.raises(
            ManifestError, match=r"^twice\.yaml:3: not valid YAML: found duplicate key 'kind'$"
        ):
            read_documents("apiVersion: v1\nkind: Pod\nkind: Deployment\n", "twice.yaml")

    def test_a_document_that_is_not_an_object_is_an_error_at_its_line(self) -> None:
        with pytest.raises(
            ManifestError,
            match=r"^x\.yaml:3: expected a Kubernetes object with apiVersion and kind$",
        ):
            read_documents(
                f"{CONFIG_MAP}---\n- just\n- a list\n".replace(CONFIG_MAP, "kind: Pod\n"), "x.yaml"
            )

    def test_a_dash_reads_standard_input(self) -> None:
        documents = read_manifest_files(["-"], io.StringIO(CONFIG_MAP))
        assert [(d.source, d.object["kind"]) for d in documents] == [("-", "ConfigMap")]

    def test_a_file_that_cannot_be_read_is_an_error_naming_it(self, tmp_path: Path) -> None:
        missing = tmp_path / "missing.yaml"
        with pytest.raises(ManifestError, match=r"missing\.yaml: cannot read: "):
            read_manifest_files([str(missing)], io.StringIO(""))


RUNTIME_RULES = (
    "device-env",
    "device-annotations",
    "device-mounts",
    "host-access",
    "privileged-containers",
)
"""What the runtime honours: judged for every pod that can reach a GPU node."""


class TestEvaluation:
    def test_a_template_is_judged_as_the_pod_made_of_it_after_defaulting_and_mutation(
        self, engine: Engine
    ) -> None:
        [doc] = read_documents(DEPLOYMENT, "deploy.yaml")
        [evaluation] = evaluate(engine, [doc]).pods
        assert (evaluation.object.kind, evaluation.object.name, evaluation.template) == (
            "Deployment",
            "llm-server",
            "/spec/template",
        )
        assert evaluation.allowed
        assert evaluation.received["spec"]["containers"][0]["resources"]["requests"] == {
            "nvidia.com/gpu": 1
        }
        assert [op["path"] for op in evaluation.patch] == [
            "/spec/affinity",
            "/spec/tolerations",
            "/spec/priorityClassName",
            "/spec/priority",
            "/metadata/annotations",
        ]
        assert evaluation.mutated["spec"]["priority"] == 1000000

    def test_the_mutated_pod_is_validated_so_the_injected_priority_passes(
        self, engine: Engine
    ) -> None:
        evaluation = evaluated(engine, pod("inference"))
        assert evaluation.allowed
        assert outcomes(evaluation)["priority-class"] == "pass"

    def test_every_validation_rule_has_an_outcome_in_a_fixed_order(self, engine: Engine) -> None:
        evaluation = evaluated(engine, pod("training", containers=[container(gpus=9)]))
        assert [r.rule for r in evaluation.rules] == list(RULES.names)
        assert not evaluation.allowed
        [gpu_count] = [r for r in evaluation.rules if r.outcome == "fail"]
        assert gpu_count.rule == "gpu-count"
        assert gpu_count.messages == (
            "pod requests 9 nvidia.com/gpu; the largest node in pool training has 8; split the work into pods of at most 8",
        )

    def test_an_unlabelled_cpu_pod_is_sent_to_no_webhook_and_skips_every_rule(
        self, engine: Engine
    ) -> None:
        """kube-apiserver sends the validating webhooks no pod of no class that can reach
        no GPU (the gpu-relevant-pod condition): offline, as live, it is admitted unjudged."""
        evaluation = evaluated(engine, pod())

        assert set(outcomes(evaluation).values()) == {"skip"}
        assert evaluation.allowed and evaluation.patch == ()

    def test_a_cpu_pod_that_tolerates_the_gpu_taints_is_sent_and_judged(
        self, engine: Engine
    ) -> None:
        tolerant = pod()
        tolerant["spec"]["tolerations"] = [{"operator": "Exists"}]

        result = outcomes(evaluated(engine, tolerant))

        assert result["non-gpu-placement"] == "fail"
        assert result["visible-devices"] == "pass"

    def test_an_unlabelled_gpu_pod_fails_for_its_missing_class_and_skips_the_rest(
        self, engine: Engine
    ) -> None:
        result = outcomes(evaluated(engine, pod(containers=[container(gpus=1)])))
        assert result["workload-class"] == "fail"
        assert {rule for rule, outcome in result.items() if outcome == "skip"} == set(
            RULES.names
        ) - {"visible-devices", "workload-class", *RUNTIME_RULES}

    def test_an_unknown_class_fails_the_class_rule_and_skips_the_class_rules(
        self, engine: Engine
    ) -> None:
        evaluation = evaluated(engine, pod("batch"))
        assert evaluation.workload_class == "batch"
        assert outcomes(evaluation)["workload-class"] == "fail"
        assert outcomes(evaluation)["gpu-count"] == "skip"

    def test_a_pod_lands_only_on_its_own_pool_and_says_why_not_on_the_others(
        self, engine: Engine
    ) -> None:
        evaluation = evaluated(engine, pod("inference"))
        assert reachable(evaluation) == {
            "inference (A100)": "yes",
            "inference (a GPU model it does not list)": "yes",
            "inference (no nvidia-gpu-model label)": "yes",
            "training (V100)": "no",
            "training (A100)": "no",
            "training (a GPU model it does not list)": "no",
            "training (no nvidia-gpu-model label)": "no",
            "a pool the policy does not name (any GPU model)": "no",
            "a pool the policy does not name (no nvidia-gpu-model label)": "no",
        }
        assert reasons(evaluation, "training (V100)") == (
            "it does not tolerate gpu-pool=training:NoSchedule",
            f"{TERMS}[0].matchExpressions[0] (gpu-pool In [inference]) "
            "does not match gpu-pool=training",
        )

    def test_a_node_selector_that_excludes_a_kind_of_node_is_named_with_its_value(
        self, engine: Engine
    ) -> None:
        evaluation = evaluated(engine, pod("inference", nodeSelector={"gpu-pool": "training"}))
        assert reasons(evaluation, "inference (A100)") == (
            "spec.nodeSelector.gpu-pool: training does not match gpu-pool=inference",
        )

    def test_a_gpu_model_label_narrows_the_landing_to_that_model(self, engine: Engine) -> None:
        evaluation = evaluated(engine, pod("training", labels={GPU_MODEL: "A100"}))
        listed = {k: v for k, v in reachable(evaluation).items() if k.endswith("00)")}
        assert listed == {
            "inference (A100)": "no",
            "training (V100)": "no",
            "training (A100)": "yes",
        }
        assert reasons(evaluation, "training (V100)") == (
            f"{TERMS}[0].matchExpressions[1] (nvidia-gpu-model In [A100]) "
            "does not match nvidia-gpu-model=V100",
        )

    def test_a_selector_on_a_label_the_policy_does_not_know_leaves_the_landing_unknown(
        self, engine: Engine
    ) -> None:
        evaluation = evaluated(
            engine, pod("inference", nodeSelector={"topology.kubernetes.io/zone": "a"})
        )
        assert reachable(evaluation)["inference (A100)"] == "unknown"
        assert (
            "names node labels or fields the policy does not know"
            in reasons(evaluation, "inference (A100)")[0]
        )

    def test_objects_without_a_pod_template_are_skipped_with_the_reason(
        self, engine: Engine
    ) -> None:
        report = evaluate(engine, read_documents(CONFIG_MAP, "cm.yaml"))
        assert report.pods == ()
        assert [(s.object.describe, s.reason) for s in report.skipped] == [
            ("ConfigMap 'settings'", "v1 ConfigMap has no pod template")
        ]
        assert report.allowed

    def test_a_workload_whose_template_is_not_a_mapping_is_denied_as_malformed(
        self, engine: Engine
    ) -> None:
        evaluation = evaluated(
            engine,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {"template": ["not", "a", "template"]},
            },
        )
        assert not evaluation.allowed
        assert evaluation.message == (
            "malformed object: spec.template: a pod template must be a mapping"
        )
        assert evaluation.rules == ()

    def test_a_malformed_pod_is_denied_with_the_engines_reason(self, engine: Engine) -> None:
        evaluation = evaluated(
            engine,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {"containers": "none"},
            },
        )
        assert not evaluation.allowed
        assert evaluation.message == "malformed object: spec.containers: must be a list"

    def test_one_denied_pod_makes_the_report_denied(self, engine: Engine) -> None:
        report = evaluate(
            engine,
            [document(pod("inference")), document(pod("training", containers=[container(gpus=9)]))],
        )
        assert [p.allowed for p in report.pods] == [True, False]
        assert not report.allowed


class TestFragments:
    @pytest.mark.parametrize(
        ("fragment", "actual"),
        [
            ({"spec": {"priority": 1}}, {"spec": {"priority": 1, "containers": []}, "kind": "Pod"}),
            ({"items": [{"b": 2}]}, {"items": [{"a": 1}, {"a": 1, "b": 2}]}),
            ({"items": [3, 1]}, {"items": [1, 2, 3]}),
            ({}, {"anything": True}),
        ],
        ids=["nested-mapping", "list-item-anywhere", "list-in-any-order", "empty-fragment"],
    )
    def test_a_fragment_contained_in_the_object_matches(self, fragment: Any, actual: Any) -> None:
        assert mismatch(fragment, actual) is None

    @pytest.mark.parametrize(
        ("fragment", "actual", "problem"),
        [
            (
                {"spec": {"priority": 1}},
                {"spec": {"priority": 2}},
                "spec.priority: expected 1, found 2",
            ),
            ({"spec": {"priority": 1}}, {"spec": {}}, "spec.priority: missing"),
            ({"items": [{"b": 3}]}, {"items": [{"b": 2}]}, 'items[0]: no item contains {"b": 3}'),
            ({"flag": True}, {"flag": 1}, "flag: expected true, found 1"),
            ({"spec": {"a": 1}}, {"spec": [1]}, "spec: expected a mapping, found [1]"),
        ],
        ids=["other-value", "missing-key", "no-such-item", "true-is-not-1", "wrong-shape"],
    )
    def test_a_fragment_not_contained_says_where_it_differs(
        self, fragment: Any, actual: Any, problem: str
    ) -> None:
        assert mismatch(fragment, actual) == problem


class TestCases:
    def test_the_shipped_example_cases_pass_on_the_default_policy(self, engine: Engine) -> None:
        results = list(run_cases(engine, SHIPPED_CASES))
        assert len(results) >= 5
        assert [(r.name, r.problems) for r in results if not r.passed] == []

    def test_a_case_expecting_the_wrong_verdict_fails_with_the_denial(self, engine: Engine) -> None:
        case = Case(object=pod("training", containers=[container(gpus=9)]), expect="allowed")
        [problem] = case_problems(case, evaluate(engine, [document(case.object)]).pods)
        assert problem.startswith("expected allowed, got denied (gpu-admission denied pod ")

    def test_a_case_names_exactly_the_rules_that_fail(self, engine: Engine) -> None:
        case = Case(
            object=pod("training", containers=[container(gpus=9)]),
            expect="denied",
            rules=["gpu-count", "priority-class"],
        )
        assert case_problems(case, evaluate(engine, [document(case.object)]).pods) == [
            "expected rules to fail: gpu-count, priority-class; failed: gpu-count"
        ]

    def test_a_case_expecting_a_patch_operation_the_mutation_lacks_fails(
        self, engine: Engine
    ) -> None:
        operation = {"op": "add", "path": "/spec/priorityClassName", "value": "training-priority"}
        case = Case(object=pod("inference"), expect="allowed", patch=[operation])
        assert case_problems(case, evaluate(engine, [document(case.object)]).pods) == [
            'patch operation {"op": "add", "path": "/spec/priorityClassName", "value": "training-priority"} is not in the mutation'
        ]

    def test_a_case_expecting_a_pod_fragment_fails_with_where_it_differs(
        self, engine: Engine
    ) -> None:
        case = Case(object=pod("inference"), expect="allowed", pods=[{"spec": {"priority": 1000}}])
        assert case_problems(case, evaluate(engine, [document(case.object)]).pods) == [
            "pods[0] is not in a mutated pod: spec.priority: expected 1000, found 1000000"
        ]

    def test_a_case_file_with_an_unknown_field_is_invalid(self) -> None:
        with pytest.raises(
            ManifestError,
            match=r"^case\.yaml:3: expected: unknown key 'expected'; did you mean 'expect'\?$",
        ):
            read_case("object: {}\nexpect: allowed\nexpected: denied\n", "case.yaml")

    def test_a_case_of_an_object_without_a_template_fails(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        case = {"object": yaml.safe_load(CONFIG_MAP), "expect": "allowed"}
        (tmp_path / "cm.yaml").write_text(yaml.safe_dump(case), "utf-8")
        [result] = run_cases(engine, tmp_path)
        assert result.problems == ("object: v1 ConfigMap has no pod template",)
        assert result.broken

    def test_a_case_that_is_not_a_case_is_broken_and_one_that_differs_is_not(
        self, engine: Engine, tmp_path: Path
    ) -> None:
        (tmp_path / "a-not-a-case.yaml").write_text("expect: maybe\n", "utf-8")
        nine = pod("training", containers=[container(gpus=9)])
        differs = {"description": "Nine GPUs.\n", "object": nine, "expect": "allowed"}
        (tmp_path / "b-differs.yaml").write_text(yaml.safe_dump(differs), "utf-8")

        not_a_case, different = run_cases(engine, tmp_path)

        assert not_a_case.broken
        assert not_a_case.problems[0].startswith("invalid case: ")
        assert not different.broken
        assert not different.passed
        assert different.description == "Nine GPUs."


class TestPresentation:
    @pytest.fixture
    def report(self, engine: Engine) -> Report:
        documents = read_documents(DEPLOYMENT + "---\n" + CONFIG_MAP, "app.yaml")
        return evaluate(engine, documents)

    def test_the_report_data_has_the_documented_shape(self, report: Report) -> None:
        data = report_data(report)
        assert list(data) == [
            "apiVersion",
            "kind",
            "policy",
            "allowed",
            "summary",
            "pods",
            "claimObjects",
            "skipped",
            "errors",
        ]
        assert data["summary"] == {
            "pods": 1, "allowed": 1, "denied": 0, "warnings": 0, "skipped": 1,
            "claimObjects": 0, "claimObjectsDenied": 0, "errors": 0,
        }  # fmt: skip
        [pod_data] = data["pods"]
        assert list(pod_data) == [
            "source", "line", "object", "template", "workloadClass", "verdict", "message",
            "warnings", "rules", "claims", "patch", "diff", "placement", "receivedPod",
            "mutatedPod",
        ]  # fmt: skip
        assert (pod_data["claims"], data["claimObjects"]) == ([], [])
        assert pod_data["object"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "serving",
            "name": "llm-server",
        }
        assert pod_data["placement"][0] == {
            "pool": "inference",
            "model": "A100",
            "nodes": "listed",
            "labels": {"gpu-pool": "inference", "nvidia-gpu-model": "A100"},
            "reachable": "yes",
            "reasons": [],
        }
        assert data["skipped"] == [
            {
                "source": "app.yaml",
                "line": 19,
                "object": {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "namespace": "",
                    "name": "settings",
                },
                "reason": "v1 ConfigMap has no pod template",
            }
        ]

    def test_the_diff_shows_the_lines_the_mutation_adds(self, report: Report) -> None:
        diff = report_data(report)["pods"][0]["diff"]
        assert diff.startswith(
            "--- Deployment 'llm-server' /spec/template (received)\n+++ Deployment 'llm-server' /spec/template (mutated)\n"
        )
        assert "+  priorityClassName: inference-priority\n" in diff
        assert "+  priority: 1000000\n" in diff

    def test_the_text_names_each_object_its_verdict_and_each_rule(self, report: Report) -> None:
        text = report_text(report)
        assert (
            "app.yaml:1 Deployment 'llm-server' /spec/template: allowed (class inference)\n" in text
        )
        assert "    pass  gpu-count\n" in text
        assert "    yes     inference (A100)\n" in text
        assert (
            "app.yaml:19 ConfigMap 'settings': skipped (v1 ConfigMap has no pod template)\n" in text
        )
        assert text.endswith("1 pod template: 1 allowed, 0 denied; 1 object skipped\n")

    def test_the_prose_says_where_the_pod_runs_at_which_priority_and_why_not_elsewhere(
        self, engine: Engine
    ) -> None:
        text = explain(evaluated(engine, pod("inference", name="x")))
        assert text.startswith(
            "inference pod 'x' would be admitted. It would run on pool inference (A100), "
            "priority 1000000 (inference-priority); it may not use pool training (V100, A100) "
            "because it does not tolerate gpu-pool=training:NoSchedule and "
            f"{TERMS}[0].matchExpressions[0] (gpu-pool In [inference]) does not match "
            "gpu-pool=training, nor a pool the policy does not name (any GPU model, no "
            "nvidia-gpu-model label) because it does not tolerate gpu-pool=<a value of no pool "
            "of the policy>:NoSchedule and its nodeSelector or required node affinity rules such "
            "nodes out (their gpu-pool label names no pool of the policy).\n"
        )

    def test_the_prose_of_a_denied_pod_lists_each_reason(self, engine: Engine) -> None:
        text = explain(
            evaluated(engine, pod("training", name="big", containers=[container(gpus=9)]))
        )
        assert text.startswith(
            "training pod 'big' would be denied:\n  - gpu-count: pod requests 9 nvidia.com/gpu;"
        )
        assert (
            "\n\nWere it admitted, it would run on pool training (V100, A100), priority 1000"
            in text
        )


def test_a_rule_in_warn_or_audit_mode_is_reported_as_such_and_admits() -> None:
    text = (
        default_policy_text()
        + "\nenforcement:\n  rules: {gpu-count: warn, priority-class: audit}\n"
    )
    engine = Engine(load_policy_text(text, "modes.yaml"))
    obj = pod("training", containers=[container(gpus=9)], priorityClassName="inference-priority", priority=1000000)  # fmt: skip

    evaluation = evaluated(engine, obj)

    outcomes = {r.rule: r.outcome for r in evaluation.rules}
    assert evaluation.allowed
    assert (outcomes["gpu-count"], outcomes["priority-class"]) == ("warn", "audit")
    assert evaluation.failed_rules == []
