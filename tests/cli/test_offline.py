"""`gpu-admission check`, `explain`, `policy schema` and `policy test` (webhook/cli/offline.py)."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from webhook.cli.main import main
from webhook.engine import RULES, Engine
from webhook.engine.pod import read_pod
from webhook.policy.load import default_policy_text, load_default_policy
from webhook.policy.schema import policy_schema_text

REPOSITORY = Path(__file__).resolve().parents[2]
POLICIES = REPOSITORY / "policies"
EXAMPLES = REPOSITORY / "examples"

Capture = pytest.CaptureFixture[str]

# The Deployment is the shipped example; the Job breaks the GPU-count rule.
APP = (
    (EXAMPLES / "inference-deployment.yaml").read_text("utf-8")
    + """\
---
apiVersion: batch/v1
kind: Job
metadata:
  name: resnet-train
spec:
  template:
    metadata:
      labels: {gpu-admission.io/workload: training}
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: registry.example/resnet-train:2.0
          resources:
            limits: {nvidia.com/gpu: 9}
---
apiVersion: v1
kind: Service
metadata:
  name: llm-server
spec:
  ports: [{port: 80}]
"""
)
UNKNOWN_RULE = "\nenforcement:\n  rules: {gpu-cout: warn}\n"
"""A rule name with a typo, which the engine refuses."""

# Where the Job is reported: the line of its apiVersion, just after the marker.
JOB_LINE = APP.splitlines().index("kind: Job")
SERVICE_LINE = APP.splitlines().index("kind: Service")


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "app.yaml"
    path.write_text(APP, "utf-8")
    return path


def stdin_of(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


NINE_GPUS = """\
apiVersion: v1
kind: Pod
metadata:
  name: big
  labels: {gpu-admission.io/workload: training}
spec:
  containers: [{name: t, image: t, resources: {limits: {nvidia.com/gpu: 9}}}]
"""


@pytest.fixture
def warn_policy(tmp_path: Path) -> Path:
    """The default policy with the GPU-count rule only warning."""
    path = tmp_path / "warn-policy.yaml"
    path.write_text(default_policy_text() + "\nenforcement:\n  rules: {gpu-count: warn}\n", "utf-8")
    return path


@pytest.fixture
def nine_gpus(tmp_path: Path) -> Path:
    path = tmp_path / "big.yaml"
    path.write_text(NINE_GPUS, "utf-8")
    return path


class TestCheck:
    def test_a_deployment_and_a_violating_job_are_each_shown_and_the_exit_status_is_1(
        self, manifest: Path, capsys: Capture
    ) -> None:
        code = main(["check", "--detailed", str(manifest)])

        out, err = capsys.readouterr()
        assert code == 1
        assert err == ""
        assert (
            f"{manifest}:1 Deployment 'llm-server' /spec/template: allowed (class inference)\n"
            in out
        )
        assert (
            f"{manifest}:{JOB_LINE} Job 'resnet-train' /spec/template: DENIED (class training)\n"
            in out
        )
        assert (
            "    FAIL  gpu-count: pod requests 9 nvidia.com/gpu; the largest node in pool training has 8;"
            in out
        )
        assert (
            f"{manifest}:{SERVICE_LINE} Service 'llm-server': skipped (v1 Service has no pod template)\n"
            in out
        )
        assert out.endswith("2 pod templates: 1 allowed, 1 denied; 1 object skipped\n")

    def test_allowed_manifests_exit_0(self, capsys: Capture) -> None:
        files = [
            EXAMPLES / "inference-deployment.yaml",
            EXAMPLES / "training-job.yaml",
            EXAMPLES / "cpu-pod.yaml",
        ]

        code = main(["check", *map(str, files)])

        out, _ = capsys.readouterr()
        assert code == 0
        assert out.endswith("1 pod and 2 pod templates: 3 allowed, 0 denied\n")

    def test_every_denied_example_is_denied(self, capsys: Capture) -> None:
        files = sorted((EXAMPLES / "denied").glob("*.yaml"))

        code = main(["check", "--output", "json", *map(str, files)])

        report = json.loads(capsys.readouterr().out)
        assert code == 1
        assert [p["verdict"] for p in report["pods"]] == ["denied"] * len(files)

    def test_a_dash_reads_the_manifest_from_standard_input(
        self, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        stdin_of(monkeypatch, APP)

        code = main(["check", "-"])

        out, _ = capsys.readouterr()
        assert code == 1
        assert f"DENIED   Job/resnet-train /spec/template  -:{JOB_LINE}  gpu-count: " in out

    def test_the_policy_is_read_from_standard_input_with_a_dash(
        self, manifest: Path, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        stdin_of(monkeypatch, (POLICIES / "overflow.yaml").read_text("utf-8"))

        code = main(["check", "-o", "json", "--policy", "-", "-f", str(manifest)])

        assert code == 1
        assert json.loads(capsys.readouterr().out)["policy"] == "-"

    @pytest.mark.parametrize(
        "args", [["--policy", "-", "-"], ["-", "-f", "-"]], ids=["policy-and-file", "two-files"]
    )
    def test_standard_input_is_read_once(self, args: list[str], capsys: Capture) -> None:
        assert main(["check", *args]) == 2
        assert capsys.readouterr().err.startswith("gpu-admission: standard input is read once")

    def test_explain_takes_its_file_with_f(self, capsys: Capture) -> None:
        code = main(["explain", "-f", str(EXAMPLES / "cpu-pod.yaml")])

        assert code == 0
        assert "etl" in capsys.readouterr().out

    def test_json_output_is_a_check_report_with_each_pod_and_each_skipped_object(
        self, manifest: Path, capsys: Capture
    ) -> None:
        code = main(["check", "--output", "json", str(manifest)])

        report = json.loads(capsys.readouterr().out)
        assert code == 1
        assert (report["apiVersion"], report["kind"], report["allowed"]) == (
            "gpu-admission.io/v1alpha1",
            "CheckReport",
            False,
        )
        assert report["policy"] == "policies/default.yaml (embedded)"
        assert report["summary"] == {
            "pods": 2,
            "allowed": 1,
            "denied": 1,
            "warnings": 0,
            "skipped": 1,
            "claimObjects": 0,
            "claimObjectsDenied": 0,
            "errors": 0,
        }
        assert report["errors"] == []
        deployment, job = report["pods"]
        assert (deployment["object"]["kind"], deployment["template"], deployment["verdict"]) == (
            "Deployment",
            "/spec/template",
            "allowed",
        )
        assert {
            "op": "add",
            "path": "/spec/priorityClassName",
            "value": "inference-priority",
        } in deployment["patch"]
        assert "+  priorityClassName: inference-priority\n" in deployment["diff"]
        assert [(p["pool"], p["model"], p["nodes"], p["reachable"]) for p in deployment["placement"]] == [
            ("inference", "A100", "listed", "yes"), ("inference", "", "unlisted-model", "yes"),
            ("inference", "", "no-model", "yes"), ("training", "V100", "listed", "no"),
            ("training", "A100", "listed", "no"), ("training", "", "unlisted-model", "no"),
            ("training", "", "no-model", "no"), ("", "", "unknown-pool", "no"),
            ("", "", "unknown-pool", "no"),
        ]  # fmt: skip
        assert job["verdict"] == "denied"
        assert job["message"].startswith(
            "gpu-admission denied Job 'default/resnet-train' template (spec.template):"
        )
        assert [r["rule"] for r in job["rules"] if r["outcome"] == "fail"] == ["gpu-count"]
        assert job["mutatedPod"]["spec"]["priorityClassName"] == "training-priority"
        assert [s["object"]["kind"] for s in report["skipped"]] == ["Service"]

    def test_yaml_output_holds_the_same_report_as_json(
        self, manifest: Path, capsys: Capture
    ) -> None:
        main(["check", "-o", "json", str(manifest)])
        as_json = json.loads(capsys.readouterr().out)

        main(["check", "-o", "yaml", str(manifest)])
        as_yaml = capsys.readouterr().out

        assert "&id" not in as_yaml
        assert yaml.safe_load(as_yaml) == as_json

    def test_another_policy_changes_the_verdict(self, tmp_path: Path, capsys: Capture) -> None:
        pod = tmp_path / "pod.yaml"
        pod.write_text(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {gpu-admission.io/workload: inference}\n"
            "spec:\n  containers: [{name: a, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n",
            "utf-8",
        )

        code = main(["check", "-o", "json", "--policy", str(POLICIES / "overflow.yaml"), str(pod)])

        report = json.loads(capsys.readouterr().out)
        assert code == 0
        assert report["policy"] == str(POLICIES / "overflow.yaml")
        listed = [p for p in report["pods"][0]["placement"] if p["nodes"] == "listed"]
        assert [p["reachable"] for p in listed] == ["yes", "yes", "yes"]

    def test_broken_yaml_is_an_error_of_the_report_naming_the_file_and_line_and_exits_2(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [p\nspec: {}\n", "utf-8")

        code = main(["check", str(broken), str(EXAMPLES / "cpu-pod.yaml")])

        out, err = capsys.readouterr()
        assert code == 2
        assert out.splitlines()[0] == f"allowed  Pod/etl  {EXAMPLES / 'cpu-pod.yaml'}:1"
        assert out.splitlines()[1].startswith(f"ERROR    {broken}:5  not valid YAML: ")
        assert out.endswith("1 pod: 1 allowed, 0 denied; 1 file unreadable\n")
        assert err.startswith(f"gpu-admission: {broken}:5: not valid YAML: ")

    def test_a_missing_file_is_an_error_of_the_report_without_errno_text(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        code = main(["check", str(tmp_path / "nowhere.yaml")])

        out, err = capsys.readouterr()
        assert code == 2
        assert f"ERROR    {tmp_path / 'nowhere.yaml'}  no such file or folder\n" in out
        assert "Errno" not in out + err

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("a: [\n", "not valid YAML: "),
            ("just a string\n", "expected a Kubernetes object with apiVersion and kind"),
        ],
        ids=["not-yaml", "not-an-object"],
    )
    def test_an_unreadable_file_is_in_every_format_and_a_denial_does_not_hide_it(
        self, tmp_path: Path, text: str, reason: str, capsys: Capture
    ) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text(text, "utf-8")
        denied = EXAMPLES / "denied" / "too-many-gpus.yaml"

        codes = {o: main(["check", "-o", o, str(broken), str(denied)]) for o in ["json", "junit"]}

        as_json, as_junit = capsys.readouterr().out.split("<?xml", 1)
        report = json.loads(as_json)
        assert codes == {"json": 2, "junit": 2}
        assert report["summary"]["errors"] == 1
        [error] = report["errors"]
        assert (error["source"], error["reason"].startswith(reason)) == (str(broken), True)
        assert [p["verdict"] for p in report["pods"]] == ["denied"]
        root = ET.fromstring(("<?xml" + as_junit).encode("utf-8"))
        assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("2", "1", "1")
        [case] = root.findall(f"testsuite[@name='{broken}']/testcase")
        assert (case.get("name"), case.find("error") is not None) == ("(file)", True)

    def test_a_broken_policy_exits_2(self, manifest: Path, tmp_path: Path, capsys: Capture) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n", "utf-8")

        code = main(["check", "--policy", str(policy), str(manifest)])

        assert code == 2
        assert capsys.readouterr().err.startswith(
            f"gpu-admission: {policy}:1: pools: missing required key 'pools'"
        )

    def test_a_policy_naming_a_rule_the_engine_does_not_have_exits_2(
        self, manifest: Path, tmp_path: Path, capsys: Capture
    ) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(default_policy_text() + UNKNOWN_RULE, "utf-8")

        code = main(["check", "--policy", str(policy), str(manifest)])

        out, err = capsys.readouterr()
        line = len(policy.read_text("utf-8").splitlines())
        assert (code, out) == (2, "")
        assert err.startswith(
            f"gpu-admission: {policy}:{line}: enforcement.rules.gpu-cout: unknown rule 'gpu-cout'"
        )

    def test_json_output_shows_each_rules_outcome_as_the_engine_reported_it(
        self, manifest: Path, capsys: Capture
    ) -> None:
        engine = Engine(load_default_policy())

        main(["check", "--output", "json", str(manifest)])

        pods = json.loads(capsys.readouterr().out)["pods"]
        for shown in pods:
            reported = engine.rule_outcomes(read_pod(shown["mutatedPod"], engine.policy))
            assert shown["rules"] == [
                {"rule": o.rule, "outcome": o.outcome, "messages": list(o.messages)}
                for o in reported
            ]
        job = {r["rule"]: r["outcome"] for r in pods[1]["rules"]}
        assert (job["gpu-count"], job["gpu-quantity"], job["non-gpu-placement"]) == (
            "fail",
            "pass",
            "skip",
        )

    def test_an_unknown_output_format_is_a_usage_error(
        self, manifest: Path, capsys: Capture
    ) -> None:
        with pytest.raises(SystemExit) as caught:
            main(["check", "--output", "xml", str(manifest)])

        assert caught.value.code == 2
        assert "invalid choice: 'xml'" in capsys.readouterr().err


class TestCheckFolders:
    def test_a_folder_is_checked_file_by_file_at_any_depth_in_path_order(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        (tmp_path / "denied").mkdir()
        (tmp_path / ".git").mkdir()
        for name in ["inference-deployment.yaml", "cpu-pod.yaml", "denied/too-many-gpus.yaml"]:
            (tmp_path / name).write_text((EXAMPLES / name).read_text("utf-8"), "utf-8")
        (tmp_path / ".git" / "HEAD.yaml").write_text("not: [a manifest", "utf-8")
        (tmp_path / "README.md").write_text("# apps\n", "utf-8")

        code = main(["check", "--detailed", str(tmp_path)])

        out = capsys.readouterr().out
        assert code == 1
        assert [
            line.split(" ")[0] for line in out.splitlines() if line.startswith(str(tmp_path))
        ] == [
            f"{tmp_path}/cpu-pod.yaml:1",
            f"{tmp_path}/denied/too-many-gpus.yaml:2",
            f"{tmp_path}/inference-deployment.yaml:1",
        ]
        assert out.endswith("2 pods and 1 pod template: 2 allowed, 1 denied\n")

    def test_the_shipped_examples_folder_is_checked_whole(self, capsys: Capture) -> None:
        code = main(["check", "-o", "json", str(EXAMPLES)])

        report = json.loads(capsys.readouterr().out)
        denied = {p["source"] for p in report["pods"] if p["verdict"] == "denied"}
        assert code == 1
        assert denied == {str(p) for p in (EXAMPLES / "denied").glob("*.yaml")}
        assert len(report["pods"]) == len(list(EXAMPLES.rglob("*.yaml")))

    def test_the_summary_of_the_shipped_examples_counts_pods_and_pod_templates_apart(
        self, capsys: Capture
    ) -> None:
        code = main(["check", str(EXAMPLES)])

        out = capsys.readouterr().out
        assert code == 1
        assert out.endswith("\n9 pods and 3 pod templates: 5 allowed, 7 denied\n")

    def test_a_folder_without_manifests_exits_2(self, tmp_path: Path, capsys: Capture) -> None:
        code = main(["check", str(tmp_path)])

        out, err = capsys.readouterr()
        assert code == 2
        assert err == (
            f"gpu-admission: {tmp_path}: no manifests (*.yaml, *.yml, *.json) in this folder\n"
        )
        assert f"ERROR    {tmp_path}  no manifests (*.yaml, *.yml, *.json) in this folder\n" in out

    def test_a_folder_with_one_broken_file_is_judged_but_for_that_file(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        for name in ["cpu-pod.yaml", "denied/no-class.yaml"]:
            (tmp_path / name).parent.mkdir(exist_ok=True)
            (tmp_path / name).write_text((EXAMPLES / name).read_text("utf-8"), "utf-8")
        (tmp_path / "half-written.yaml").write_text("kind: Pod\nmetadata: {name: [\n", "utf-8")

        code = main(["check", "-o", "junit", str(tmp_path)])

        root = ET.fromstring(capsys.readouterr().out.encode("utf-8"))
        assert code == 2
        assert [s.get("name") for s in root.findall("testsuite")] == [
            str(tmp_path / "cpu-pod.yaml"),
            str(tmp_path / "denied" / "no-class.yaml"),
            str(tmp_path / "half-written.yaml"),
        ]
        assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")


class TestCheckJunit:
    def test_junit_output_is_a_testsuite_per_file_and_a_testcase_per_object(
        self, manifest: Path, capsys: Capture
    ) -> None:
        cpu_pod = EXAMPLES / "cpu-pod.yaml"

        code = main(["check", "--output", "junit", str(manifest), str(cpu_pod)])

        root = ET.fromstring(capsys.readouterr().out.encode("utf-8"))
        assert code == 1
        assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("4", "1", "1")
        assert [s.get("name") for s in root.findall("testsuite")] == [str(manifest), str(cpu_pod)]
        [failure] = root.findall(".//failure")
        assert failure.get("message", "").startswith(
            "gpu-admission denied Job 'default/resnet-train' template (spec.template):"
        )

    def test_a_file_without_objects_is_an_empty_testsuite(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        empty = tmp_path / "empty.yaml"
        empty.write_text("# nothing yet\n", "utf-8")

        code = main(["check", "-o", "junit", str(empty)])

        root = ET.fromstring(capsys.readouterr().out.encode("utf-8"))
        assert code == 0
        [suite] = root.findall("testsuite")
        assert (suite.get("name"), suite.get("tests"), suite.findall("testcase")) == (
            str(empty),
            "0",
            [],
        )


class TestCheckWarnings:
    def test_warnings_are_shown_as_kubectl_prints_them_and_counted(
        self, warn_policy: Path, nine_gpus: Path, capsys: Capture
    ) -> None:
        code = main(["check", "-v", "--policy", str(warn_policy), str(nine_gpus)])

        out = capsys.readouterr().out
        assert code == 0
        assert (
            "  warnings (kubectl prints them):\n"
            "    Warning: gpu-admission: gpu-count: pod requests 9 nvidia.com/gpu;"
        ) in out
        assert out.endswith("1 pod: 1 allowed, 0 denied; 1 warning\n")

    def test_the_report_counts_warnings_and_lists_them_per_pod(
        self, warn_policy: Path, nine_gpus: Path, capsys: Capture
    ) -> None:
        main(["check", "-o", "json", "--policy", str(warn_policy), str(nine_gpus)])

        report = json.loads(capsys.readouterr().out)
        [warning] = report["pods"][0]["warnings"]
        assert report["summary"]["warnings"] == 1
        assert warning.startswith("gpu-admission: gpu-count: pod requests 9 nvidia.com/gpu;")

    @pytest.mark.parametrize("code", [1, 3])
    def test_admitted_with_warnings_exits_with_the_code_asked_for(
        self, warn_policy: Path, nine_gpus: Path, code: int, capsys: Capture
    ) -> None:
        args = ["check", "--policy", str(warn_policy), str(nine_gpus)]

        assert main([*args, "--warnings-exit-code", str(code)]) == code
        assert main(args) == 0

    def test_without_warnings_the_warnings_exit_code_does_not_apply(
        self, warn_policy: Path, capsys: Capture
    ) -> None:
        code = main(
            ["check", "--warnings-exit-code", "3", "--policy", str(warn_policy), str(EXAMPLES)]
        )

        assert code == 1  # the denied examples
        assert main(["check", "--warnings-exit-code", "3", str(EXAMPLES / "cpu-pod.yaml")]) == 0

    @pytest.mark.parametrize("value", ["-1", "256", "x"])
    def test_a_warnings_exit_code_that_is_not_an_exit_status_is_a_usage_error(
        self, nine_gpus: Path, value: str, capsys: Capture
    ) -> None:
        with pytest.raises(SystemExit) as exit_:
            main(["check", "--warnings-exit-code", value, str(nine_gpus)])

        assert exit_.value.code == 2
        assert "argument --warnings-exit-code: " in capsys.readouterr().err


class TestExplain:
    def test_the_warnings_kubectl_would_print_are_explained(
        self, warn_policy: Path, nine_gpus: Path, capsys: Capture
    ) -> None:
        code = main(["explain", "--policy", str(warn_policy), str(nine_gpus)])

        out = capsys.readouterr().out
        assert code == 0
        assert out.startswith("training pod 'big' would be admitted.")
        assert (
            "\n\nkubectl would print 1 warning:\n"
            "  Warning: gpu-admission: gpu-count: pod requests 9 nvidia.com/gpu;"
        ) in out

    def test_a_policy_naming_a_rule_the_engine_does_not_have_exits_2(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(default_policy_text() + UNKNOWN_RULE, "utf-8")

        code = main(
            ["explain", "--policy", str(policy), str(EXAMPLES / "inference-deployment.yaml")]
        )

        assert code == 2
        assert "enforcement.rules.gpu-cout: unknown rule 'gpu-cout'" in capsys.readouterr().err

    def test_an_allowed_pod_is_explained_in_prose_with_exit_status_0(self, capsys: Capture) -> None:
        code = main(["explain", str(EXAMPLES / "inference-deployment.yaml")])

        out, _ = capsys.readouterr()
        assert code == 0
        assert out.startswith(
            "inference pod of Deployment 'llm-server' (template /spec/template) would be admitted. "
            "It would run on pool inference (A100), priority 1000000 (inference-priority); "
            "it may not use pool training (V100, A100) because it does not tolerate "
            "gpu-pool=training:NoSchedule"
        )

    def test_a_denied_pod_is_explained_with_its_reasons_and_exit_status_1(
        self, capsys: Capture
    ) -> None:
        code = main(["explain", str(EXAMPLES / "denied" / "visible-devices.yaml")])

        out, _ = capsys.readouterr()
        assert code == 1
        assert out.startswith(
            "pod 'visible-devices' would be denied:\n  - visible-devices: container 'cuda' sets NVIDIA_VISIBLE_DEVICES=all"
        )

    def test_one_object_is_explained_alone_without_a_heading(self, capsys: Capture) -> None:
        from webhook.offline.documents import read_manifest_files
        from webhook.offline.evaluation import evaluate
        from webhook.offline.prose import explain

        path = str(EXAMPLES / "training-job.yaml")
        [job] = evaluate(
            Engine(load_default_policy()), read_manifest_files([path], io.StringIO())
        ).pods

        code = main(["explain", path])

        assert (code, capsys.readouterr().out) == (0, explain(job))

    def test_a_folder_is_explained_object_by_object_each_under_its_line_of_check(
        self, capsys: Capture
    ) -> None:
        main(["check", str(EXAMPLES)])
        checked = capsys.readouterr().out.splitlines()

        code = main(["explain", str(EXAMPLES)])

        out = capsys.readouterr().out
        headings = [line for line in out.splitlines() if line and not line.startswith(" ")]
        assert code == 1
        assert headings == checked
        assert headings[-1] == "9 pods and 3 pod templates: 5 allowed, 7 denied"
        assert (
            f"allowed  Pod/etl  {EXAMPLES}/cpu-pod.yaml:1\n    pod 'etl' would be admitted. "
        ) in out
        assert (
            f"DENIED   Pod/no-class  {EXAMPLES}/denied/no-class.yaml:2  workload-class: "
        ) in out
        assert "\n    pod 'no-class' would be denied:\n      - workload-class: " in out

    def test_a_file_of_several_objects_is_explained_each_with_what_check_skips(
        self, manifest: Path, capsys: Capture
    ) -> None:
        code = main(["explain", str(manifest)])

        out = capsys.readouterr().out
        headings = [line for line in out.splitlines() if line and not line.startswith(" ")]
        assert code == 1
        assert [heading.split()[:3] for heading in headings[:-1]] == [
            ["allowed", "Deployment/llm-server", "/spec/template"],
            ["DENIED", "Job/resnet-train", "/spec/template"],
            ["skipped", "Service/llm-server", f"{manifest}:{SERVICE_LINE}"],
        ]
        assert headings[-1] == "2 pod templates: 1 allowed, 1 denied; 1 object skipped"
        assert (
            "\n    Service 'llm-server': nothing to explain, v1 Service has no pod template\n"
        ) in out

    def test_several_files_are_explained_in_turn_and_an_unreadable_one_exits_2(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        broken = tmp_path / "broken.yaml"
        broken.write_text("kind: Pod\nmetadata: {name: [\n", "utf-8")
        cpu_pod = EXAMPLES / "cpu-pod.yaml"

        code = main(["explain", str(broken), "-f", str(cpu_pod)])

        out, err = capsys.readouterr()
        assert code == 2
        assert out.startswith(f"allowed  Pod/etl  {cpu_pod}:1\n    pod 'etl' would be admitted.")
        assert out.endswith(
            f"\n\nERROR    {broken}:3  not valid YAML: expected the node content, but found "
            "'<stream end>'\n\n1 pod: 1 allowed, 0 denied; 1 file unreadable\n"
        )
        assert err.startswith(f"gpu-admission: {broken}:3: not valid YAML: ")

    def test_a_denial_among_several_exits_1(self, capsys: Capture) -> None:
        denied = EXAMPLES / "denied" / "too-many-gpus.yaml"

        assert main(["explain", str(EXAMPLES / "cpu-pod.yaml"), str(denied)]) == 1
        assert (
            main(["explain", str(EXAMPLES / "cpu-pod.yaml"), str(EXAMPLES / "training-job.yaml")])
            == 0
        )

    def test_a_file_that_cannot_be_read_alone_is_its_error_line_as_check_lists_it(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        missing = tmp_path / "missing.yaml"

        code = main(["explain", str(missing)])

        assert code == 2
        assert capsys.readouterr() == (
            f"ERROR    {missing}  no such file or folder\n\n"
            "0 pods: 0 allowed, 0 denied; 1 file unreadable\n",
            f"gpu-admission: {missing}: no such file or folder\n",
        )

    def test_a_file_without_objects_has_nothing_to_explain(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        empty = tmp_path / "empty.yaml"
        empty.write_text("# nothing yet\n", "utf-8")

        code = main(["explain", str(empty)])

        assert code == 2
        assert capsys.readouterr().err == (
            f"gpu-admission: explain: nothing to explain, no object in {empty}\n"
        )

    def test_standard_input_is_read_once(self, capsys: Capture) -> None:
        assert main(["explain", "--policy", "-", "-"]) == 2
        assert capsys.readouterr().err.startswith("gpu-admission: standard input is read once")

    def test_an_object_without_a_template_has_nothing_to_explain(
        self, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        stdin_of(monkeypatch, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")

        code = main(["explain", "-"])

        assert code == 0
        assert (
            capsys.readouterr().out
            == "ConfigMap 'c': nothing to explain, v1 ConfigMap has no pod template\n"
        )


class TestPolicySchema:
    def test_the_schema_is_printed_to_standard_output_by_default(
        self, capsys: Capture, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        written: list[Path] = []
        monkeypatch.setattr(Path, "write_text", lambda path, *_: written.append(path))

        code = main(["policy", "schema"])

        assert code == 0
        assert capsys.readouterr().out == policy_schema_text(RULES.names)
        assert written == []

    def test_the_schema_is_written_where_asked(self, tmp_path: Path, capsys: Capture) -> None:
        target = tmp_path / "schema.json"

        code = main(["policy", "schema", "--output-file", str(target)])

        assert code == 0
        assert target.read_text("utf-8") == policy_schema_text(RULES.names)
        assert capsys.readouterr().out == f"wrote {target}\n"

    def test_a_dash_writes_the_schema_to_standard_output(self, capsys: Capture) -> None:
        code = main(["policy", "schema", "--output-file", "-"])

        assert code == 0
        assert json.loads(capsys.readouterr().out)["title"] == "gpu-admission policy"

    def test_output_is_the_format_as_in_every_command(self, capsys: Capture) -> None:
        code = main(["policy", "schema", "-o", "yaml"])

        assert code == 0
        assert yaml.safe_load(capsys.readouterr().out)["title"] == "gpu-admission policy"

    @pytest.mark.parametrize("option", ["-o", "--output"])
    def test_the_old_spelling_of_a_path_is_refused_naming_the_new_one(
        self, tmp_path: Path, option: str, capsys: Capture
    ) -> None:
        target = tmp_path / "schema.json"

        with pytest.raises(SystemExit) as exit_:
            main(["policy", "schema", option, str(target)])

        err = capsys.readouterr().err
        assert exit_.value.code == 2
        assert err.startswith("usage: gpu-admission policy schema ")
        assert f"use --output-file {target}\n" in err
        assert not target.exists()


class TestPolicyTest:
    def test_the_shipped_cases_pass_with_one_line_each(self, capsys: Capture) -> None:
        code = main(["policy", "test", str(POLICIES / "tests")])

        lines = capsys.readouterr().out.splitlines()
        cases = sorted(p.name for p in (POLICIES / "tests").glob("*.yaml"))
        assert code == 0
        assert lines == [f"PASS {name}" for name in cases] + [
            f"{len(cases)} cases: {len(cases)} passed, 0 failed"
        ]

    def test_a_failing_case_is_named_with_why_and_the_exit_status_is_1(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        case = yaml.safe_load(
            (POLICIES / "tests" / "training-job-nine-gpus-denied.yaml").read_text("utf-8")
        )
        case["expect"] = "allowed"
        (tmp_path / "nine.yaml").write_text(yaml.safe_dump(case), "utf-8")
        (tmp_path / "cpu.yaml").write_text(
            (POLICIES / "tests" / "cpu-pod-allowed.yaml").read_text("utf-8"), "utf-8"
        )

        code = main(["policy", "test", str(tmp_path)])

        lines = capsys.readouterr().out.splitlines()
        assert code == 1
        assert lines[0] == "PASS cpu.yaml"
        assert lines[1].startswith(
            "FAIL nine.yaml: expected allowed, got denied (gpu-admission denied Job 'default/resnet-train' template (spec.template): pod requests 9"
        )
        assert lines[2] == "2 cases: 1 passed, 1 failed"

    def test_the_cases_run_against_the_policy_given(self, tmp_path: Path, capsys: Capture) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(
            default_policy_text().replace("value: 1000000", "value: 2000000"), "utf-8"
        )
        cases = tmp_path / "cases"
        cases.mkdir()
        case = POLICIES / "tests" / "inference-pod-gets-priority-and-affinity.yaml"
        (cases / case.name).write_text(case.read_text("utf-8"), "utf-8")

        code = main(["policy", "test", "--policy", str(policy), str(cases)])

        out = capsys.readouterr().out
        assert code == 1
        assert out.startswith(f"FAIL {case.name}: patch operation ")
        assert (
            "pods[0] is not in a mutated pod: spec.priority: expected 1000000, found 2000000\n"
            in out
        )

    def test_a_policy_naming_a_rule_the_engine_does_not_have_exits_2(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text(default_policy_text() + UNKNOWN_RULE, "utf-8")

        code = main(["policy", "test", "--policy", str(policy), str(POLICIES / "tests")])

        out, err = capsys.readouterr()
        assert (code, out) == (2, "")
        assert "enforcement.rules.gpu-cout: unknown rule 'gpu-cout'" in err

    def test_the_shipped_cases_pass_on_a_copy_of_the_policy_with_its_pod_labels_renamed(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        text = (
            default_policy_text()
            .replace("workload: gpu-admission.io/workload", "workload: example.com/gpu-class")
            .replace("gpuModel: gpu-admission.io/gpu-model", "gpuModel: example.com/gpu-model")
        )
        assert "gpu-admission.io/workload" not in text
        assert "gpuModel: example.com/gpu-model" in text
        policy = tmp_path / "policy.yaml"
        policy.write_text(text, "utf-8")

        code = main(["policy", "test", "--policy", str(policy), str(POLICIES / "tests")])

        lines = capsys.readouterr().out.splitlines()
        cases = sorted(p.name for p in (POLICIES / "tests").glob("*.yaml"))
        assert (code, lines[-1]) == (0, f"{len(cases)} cases: {len(cases)} passed, 0 failed")

    def test_junit_output_is_a_testcase_per_case_instead_of_the_lines(
        self, capsys: Capture
    ) -> None:
        code = main(["policy", "test", "--output", "junit", str(POLICIES / "tests")])

        root = ET.fromstring(capsys.readouterr().out.encode("utf-8"))
        cases = sorted(p.name for p in (POLICIES / "tests").glob("*.yaml"))
        assert code == 0
        assert (root.get("name"), root.get("tests"), root.get("failures")) == (
            "gpu-admission policy test",
            str(len(cases)),
            "0",
        )
        assert [c.get("name") for c in root.findall(".//testcase")] == cases

    def test_junit_output_fails_a_case_with_expected_against_got_and_exits_1(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        case = yaml.safe_load(
            (POLICIES / "tests" / "training-job-nine-gpus-denied.yaml").read_text("utf-8")
        )
        case["expect"] = "allowed"
        (tmp_path / "nine.yaml").write_text(yaml.safe_dump(case), "utf-8")

        code = main(["policy", "test", "-o", "junit", str(tmp_path)])

        root = ET.fromstring(capsys.readouterr().out.encode("utf-8"))
        [failure] = root.findall(".//testcase[@name='nine.yaml']/failure")
        assert code == 1
        assert failure.get("message", "").startswith("expected allowed, got denied (")
        assert root.findall("testsuite")[0].get("name") == str(tmp_path)

    def test_a_folder_without_cases_is_a_case_that_cannot_be_run(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        code = main(["policy", "test", str(tmp_path)])

        assert code == 2
        assert capsys.readouterr().out == (
            f"ERROR {tmp_path}: no test cases (*.yaml, *.yml) in this folder\n"
            "1 cases: 0 passed, 0 failed, 1 could not be run\n"
        )

    @pytest.mark.parametrize("workload", ["", "workload: training\n"])
    def test_a_case_whose_objects_kind_is_no_string_cannot_be_run(
        self, tmp_path: Path, capsys: Capture, workload: str
    ) -> None:
        for name, kind in [("list", "[Pod]"), ("mapping", "{a: b}")]:
            (tmp_path / f"{name}.yaml").write_text(
                f"{workload}expect: allowed\n"
                f"object: {{apiVersion: v1, kind: {kind}, metadata: {{name: p}}}}\n"
            )

        code = main(["policy", "test", str(tmp_path)])

        assert code == 2
        assert capsys.readouterr().out.endswith("2 cases: 0 passed, 0 failed, 2 could not be run\n")

    def test_a_single_file_and_a_folder_are_run_and_run_selects_cases_by_name(
        self, capsys: Capture
    ) -> None:
        single = POLICIES / "tests" / "cpu-pod-allowed.yaml"

        code = main(
            ["policy", "test", "-f", str(single), str(POLICIES / "tests"), "--run", "nine|cpu-pod"]
        )

        assert code == 0
        assert capsys.readouterr().out.splitlines() == [
            f"PASS {single}",
            "PASS cpu-pod-allowed.yaml",
            "PASS training-job-nine-gpus-denied.yaml",
            "3 cases: 3 passed, 0 failed",
        ]

    def test_a_case_on_standard_input_is_run(
        self, monkeypatch: pytest.MonkeyPatch, capsys: Capture
    ) -> None:
        stdin_of(
            monkeypatch, (POLICIES / "tests" / "visible-devices-denied.yaml").read_text("utf-8")
        )

        assert main(["policy", "test", "-"]) == 0
        assert capsys.readouterr().out.startswith("PASS -\n")

    def test_a_broken_policy_in_junit_is_a_report_of_one_error(
        self, tmp_path: Path, capsys: Capture
    ) -> None:
        policy = tmp_path / "policy.yaml"
        policy.write_text("apiVersion: gpu-admission.io/v1alpha1\nkind: Policy\n", "utf-8")

        code = main(
            ["policy", "test", "-o", "junit", "--policy", str(policy), str(POLICIES / "tests")]
        )

        out, err = capsys.readouterr()
        root = ET.fromstring(out.encode("utf-8"))
        assert code == 2
        assert err.startswith(f"gpu-admission: {policy}:1: ")
        assert (root.get("name"), root.get("tests"), root.get("errors")) == (
            "gpu-admission policy test",
            "1",
            "1",
        )
        [error] = root.findall("testsuite/testcase/error")
        assert error.get("type") == "policy"

    def test_run_selecting_no_case_is_a_usage_error(self, capsys: Capture) -> None:
        code = main(["policy", "test", str(POLICIES / "tests"), "--run", "no-such-case"])

        assert code == 2
        assert capsys.readouterr().err == "gpu-admission: no case matches --run no-such-case\n"

    def test_json_output_is_a_policy_test_report(self, tmp_path: Path, capsys: Capture) -> None:
        (tmp_path / "not-a-case.yaml").write_text("expect: maybe\n", "utf-8")
        cases = [str(POLICIES / "tests" / "cpu-pod-allowed.yaml"), str(tmp_path)]

        code = main(["policy", "test", "-o", "json", *cases])

        report = json.loads(capsys.readouterr().out)
        assert code == 2
        assert (report["kind"], report["passed"], report["summary"]) == (
            "PolicyTestReport",
            False,
            {"cases": 2, "passed": 1, "failed": 0, "errors": 1},
        )
        assert [(c["name"], c["result"]) for c in report["cases"]] == [
            (cases[0], "pass"),
            ("not-a-case.yaml", "error"),
        ]
