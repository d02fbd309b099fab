"""The installed `gpu-admission` command, run as a user or a policy repository's CI runs it.

Each test starts the console script that installing the package put next to the Python
running the tests (`Path(sys.executable).parent / "gpu-admission"`), in a process of its
own: a home directory of the test's, no kubeconfig, no in-cluster variables and no
PYTHONPATH, in a working directory of the test's. So these prove the entry point, the
package's data and the exit statuses as a shell sees them, none of which calling
`main(argv)` in-process can. No run may print a traceback. What each command says in
detail is proven beside its module (tests/cli/test_offline.py, test_policy_validate.py,
...); here, each behaviour once, end to end. Nothing needs a cluster: the unreachable
one is a local port nothing listens on.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from webhook.cli.main import COMMAND_GROUPS
from webhook.policy.load import default_policy_text

BIN = Path(sys.executable).parent
INSTALLED = BIN / "gpu-admission"
REPOSITORY = Path(__file__).resolve().parents[2]
POLICY_CASES = REPOSITORY / "policies" / "tests"

ISOLATED = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "PYTHONPATH")
"""Variables of the test run's environment that the command must not see."""

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")

CPU_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: etl}
spec:
  containers: [{name: etl, image: etl:5, resources: {requests: {cpu: "1"}}}]
"""
VISIBLE_DEVICES_POD = """\
# picks GPUs by hand
apiVersion: v1
kind: Pod
metadata: {name: by-hand}
spec:
  containers: [{name: cuda, image: cuda:12, env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]}]
"""
NINE_GPUS_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: big
  labels: {gpu-admission.io/workload: training}
spec:
  containers: [{name: t, image: t, resources: {limits: {nvidia.com/gpu: 9}}}]
"""
RESOURCE_TYPO_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels: {gpu-admission.io/workload: training}
spec:
  containers: [{name: t, image: t, resource: {limits: {nvidia.com/gpu: 4}}}]
"""
"""The issue's pod: `resource:` where `resources:` is meant, asking 4 GPUs."""
WARN_ON_GPU_COUNT = "\nenforcement:\n  rules: {gpu-count: warn}\n"
"""Appended to the default policy: the GPU-count rule warns instead of denying."""


class GpuAdmission:
    """Runs the installed command in `cwd` with the isolated environment."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home = home
        self.cwd = cwd

    def environment(self, extra: Mapping[str, str] = {}) -> dict[str, str]:
        environ = {k: v for k, v in os.environ.items() if k not in ISOLATED}
        environ["HOME"] = str(self.home)
        environ["PATH"] = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
        environ.update(extra)
        return environ

    def __call__(
        self, *args: str, cwd: Path | None = None, env: Mapping[str, str] = {}
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [str(INSTALLED), *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.cwd,
            env=self.environment(env),
            timeout=60,
        )
        assert "Traceback" not in result.stderr, result.stderr
        return result


@pytest.fixture(scope="module")
def installed() -> Path:
    if not os.access(INSTALLED, os.X_OK):
        pytest.fail(
            f"{INSTALLED} does not exist: these tests run the installed command; install "
            f"the package into the environment of {sys.executable} "
            "(pip install --no-deps -e .)",
            pytrace=False,
        )
    return INSTALLED


@pytest.fixture
def gpu_admission(installed: Path, tmp_path: Path) -> GpuAdmission:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    return GpuAdmission(home, work)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def headlines(report: str) -> list[str]:
    """The lines of a text report that start a pod's block or name a skipped object."""
    return [line for line in report.splitlines() if line and not line.startswith(" ")]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def unreachable_kubeconfig(path: Path) -> tuple[Path, str]:
    """A kubeconfig whose only cluster is a local port nothing listens on, and its server."""
    server = f"https://127.0.0.1:{closed_port()}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "down", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "down", "context": {"cluster": "down", "user": "u"}}],
        "current-context": "down",
    }
    return write(path, yaml.safe_dump(config)), server


# --- the command itself ------------------------------------------------------------------


def test_version_is_that_of_the_installed_distribution(gpu_admission: GpuAdmission) -> None:
    result = gpu_admission("--version")

    assert (result.returncode, result.stdout) == (0, f"gpu-admission {version('gpu-admission')}\n")


def test_the_version_command_says_the_same_and_more_for_scripts(
    gpu_admission: GpuAdmission,
) -> None:
    text = gpu_admission("version")
    as_json = gpu_admission("version", "-o", "json")
    as_yaml = gpu_admission("version", "--output", "yaml")

    assert (text.returncode, text.stdout) == (0, f"gpu-admission {version('gpu-admission')}\n")
    info = json.loads(as_json.stdout)
    assert info["version"] == version("gpu-admission")
    assert info["admissionReview"] == "admission.k8s.io/v1"
    assert info["python"] == platform.python_version()
    assert yaml.safe_load(as_yaml.stdout) == info


def test_check_admitted_prints_the_objects_kubectl_apply_takes_and_the_denials_apart(
    gpu_admission: GpuAdmission, tmp_path: Path
) -> None:
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: chat, labels: {gpu-admission.io/workload: "
        "inference}}\nspec: {containers: [{name: main, image: x}]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: greedy, labels: {gpu-admission.io/workload: "
        "inference}}\nspec: {containers: [{name: main, image: x, resources: {limits: "
        "{nvidia.com/gpu: 99}}}]}\n",
        "utf-8",
    )

    as_yaml = gpu_admission("check", "--admitted", str(manifest))
    as_json = gpu_admission("check", "--admitted", "-o", "json", str(manifest))
    junit = gpu_admission("check", "--admitted", "-o", "junit", str(manifest))

    (chat,) = list(yaml.safe_load_all(as_yaml.stdout))
    assert as_yaml.returncode == 1
    assert chat["metadata"]["name"] == "chat"
    assert chat["spec"]["priorityClassName"] == "inference-priority"
    assert as_yaml.stderr.startswith(f"gpu-admission check: refused: {manifest}:6: ")
    assert json.loads(as_json.stdout) == {"apiVersion": "v1", "kind": "List", "items": [chat]}
    assert junit.returncode == 2
    assert "--admitted prints objects" in junit.stderr


def test_help_lists_every_command(gpu_admission: GpuAdmission) -> None:
    result = gpu_admission("--help")

    commands = [name for group in COMMAND_GROUPS for name in group.commands]
    assert result.returncode == 0
    assert result.stdout.startswith("usage: gpu-admission ")
    assert "{" + ",".join(commands) + "}" in result.stdout


def test_the_ci_options_are_in_the_commands_help(gpu_admission: GpuAdmission) -> None:
    check = gpu_admission("check", "--help")
    policy_test = gpu_admission("policy", "test", "--help")

    assert (check.returncode, policy_test.returncode) == (0, 0)
    assert "--warnings-exit-code N" in check.stdout
    assert "--output {text,json,yaml,junit}" in policy_test.stdout


@needs_bash
def test_the_bash_completion_sourced_in_bash_completes_commands_and_options(
    gpu_admission: GpuAdmission,
) -> None:
    script = """\
source <(gpu-admission completion bash) || exit 1
complete -p gpu-admission
offer() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
    _gpu_admission
    echo "${COMPREPLY[*]}"
}
offer gpu-admission po
offer gpu-admission policy test --output ''
offer gpu-admission check --warn
"""
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        text=True,
        cwd=gpu_admission.cwd,
        env=gpu_admission.environment(),
        timeout=60,
    )

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.splitlines() == [
        "complete -F _gpu_admission gpu-admission",
        "policy",
        "text json yaml junit",
        "--warnings-exit-code",
    ]


# --- check and explain -------------------------------------------------------------------


@pytest.fixture
def manifests(gpu_admission: GpuAdmission) -> Path:
    """manifests/ in the working directory: an allowed pod, a denied one two folders
    down, and a hidden folder and a text file that are not read."""
    folder = gpu_admission.cwd / "manifests"
    write(folder / "cpu.yaml", CPU_POD)
    write(folder / "apps" / "deep" / "by-hand.yaml", VISIBLE_DEVICES_POD)
    write(folder / ".drafts" / "draft.yaml", VISIBLE_DEVICES_POD)
    write(folder / "notes.txt", "not a manifest\n")
    return folder


@pytest.fixture
def warn_policy(gpu_admission: GpuAdmission) -> Path:
    return write(gpu_admission.cwd / "warn.yaml", default_policy_text() + WARN_ON_GPU_COUNT)


def test_check_reads_a_folder_at_any_depth_in_path_order(
    gpu_admission: GpuAdmission, manifests: Path
) -> None:
    result = gpu_admission("check", "--detailed", "manifests")

    assert (result.returncode, result.stderr) == (1, "")
    assert headlines(result.stdout) == [
        "manifests/apps/deep/by-hand.yaml:2 Pod 'by-hand': DENIED (no workload class)",
        "manifests/cpu.yaml:1 Pod 'etl': allowed (no workload class)",
        "2 pods: 1 allowed, 1 denied",
    ]


def test_check_junit_is_xml_with_a_testsuite_per_file(
    gpu_admission: GpuAdmission, manifests: Path
) -> None:
    result = gpu_admission("check", "--output", "junit", "manifests")

    root = ET.fromstring(result.stdout.encode("utf-8"))
    assert (result.returncode, result.stderr) == (1, "")
    assert (root.tag, root.get("tests"), root.get("failures")) == ("testsuites", "2", "1")
    assert [s.get("name") for s in root.findall("testsuite")] == [
        "manifests/apps/deep/by-hand.yaml",
        "manifests/cpu.yaml",
    ]
    [failure] = root.findall(".//testcase[@name=\"Pod 'by-hand' (line 2)\"]/failure")
    assert (failure.text or "").startswith("visible-devices: container 'cuda' sets ")


def test_check_counts_warnings_and_still_exits_0(
    gpu_admission: GpuAdmission, warn_policy: Path
) -> None:
    write(gpu_admission.cwd / "big.yaml", NINE_GPUS_POD)

    result = gpu_admission("check", "--policy", "warn.yaml", "big.yaml")
    detailed = gpu_admission("check", "-v", "--policy", "warn.yaml", "big.yaml")

    assert (result.returncode, detailed.returncode) == (0, 0)
    first, warning, summary = result.stdout.splitlines()
    assert (
        first == "allowed  Pod/big  big.yaml:1  mutated: affinity, tolerations, priority; 1 warning"
    )
    assert warning.startswith(
        "    Warning: gpu-admission: gpu-count: pod requests 9 nvidia.com/gpu"
    )
    assert summary == "1 pod: 1 allowed, 0 denied; 1 warning"
    assert "    Warning: gpu-admission: gpu-count: pod requests 9 nvidia.com/gpu" in detailed.stdout
    assert detailed.stdout.endswith("\n1 pod: 1 allowed, 0 denied; 1 warning\n")


def test_check_warns_of_an_unknown_field_in_text_and_json(gpu_admission: GpuAdmission) -> None:
    write(gpu_admission.cwd / "typo.yaml", RESOURCE_TYPO_POD)

    result = gpu_admission("check", "typo.yaml")
    detailed = gpu_admission("check", "-v", "typo.yaml")
    data = gpu_admission("check", "-o", "json", "--warnings-exit-code", "3", "typo.yaml")

    warning = (
        'unknown field "spec.containers[0].resource" (did you mean "resources"?): '
        "kubectl's default --validate=strict refuses it; "
        "with --validate=false it is dropped and the object judged without it"
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "allowed  Pod/trainer  typo.yaml:1  mutated: affinity, tolerations, priority, "
        "gpu-limits; 1 warning\n"
        f"    Warning: {warning}\n"
        "1 pod: 1 allowed, 0 denied; 1 warning\n"
    )
    assert f"    Warning: {warning}\n" in detailed.stdout
    assert data.returncode == 3
    report = json.loads(data.stdout)
    assert report["pods"][0]["warnings"] == [warning]
    assert report["summary"]["warnings"] == 1


@pytest.mark.parametrize("code", [1, 3])
def test_check_admitted_with_warnings_exits_with_the_warnings_exit_code(
    gpu_admission: GpuAdmission, warn_policy: Path, code: int
) -> None:
    write(gpu_admission.cwd / "big.yaml", NINE_GPUS_POD)

    result = gpu_admission(
        "check", "--policy", "warn.yaml", "--warnings-exit-code", str(code), "big.yaml"
    )

    assert (result.returncode, result.stderr) == (code, "")
    assert result.stdout.endswith("; 1 warning\n")


def test_a_denial_exits_1_whatever_the_warnings_exit_code(
    gpu_admission: GpuAdmission, warn_policy: Path
) -> None:
    write(gpu_admission.cwd / "big.yaml", NINE_GPUS_POD)
    write(gpu_admission.cwd / "by-hand.yaml", VISIBLE_DEVICES_POD)

    result = gpu_admission(
        "check", "--policy", "warn.yaml", "--warnings-exit-code", "3", "big.yaml", "by-hand.yaml"
    )

    assert result.returncode == 1
    assert result.stdout.endswith("2 pods: 1 allowed, 1 denied; 1 warning\n")


def test_check_junit_keeps_its_report_when_an_input_is_broken(
    gpu_admission: GpuAdmission, manifests: Path
) -> None:
    write(manifests / "half-written.yaml", "kind: Pod\nmetadata: {name: [\n")
    write(gpu_admission.cwd / "good.yaml", CPU_POD)

    result = gpu_admission("check", "-o", "junit", "manifests", "good.yaml", "missing.yaml")

    root = ET.fromstring(result.stdout.encode("utf-8"))
    assert result.returncode == 2
    assert [s.get("name") for s in root.findall("testsuite")] == [
        "manifests/apps/deep/by-hand.yaml",
        "manifests/cpu.yaml",
        "manifests/half-written.yaml",
        "good.yaml",
        "missing.yaml",
    ]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "1", "2")
    [broken] = root.findall("testsuite[@name='manifests/half-written.yaml']/testcase/error")
    assert broken.get("message", "").startswith("manifests/half-written.yaml:3: not valid YAML")
    [missing] = root.findall("testsuite[@name='missing.yaml']/testcase/error")
    assert missing.get("message") == "missing.yaml: no such file or folder"


def test_check_junit_on_a_broken_policy_is_a_report_of_one_error(
    gpu_admission: GpuAdmission, manifests: Path
) -> None:
    write(gpu_admission.cwd / "policy.yaml", BROKEN_POLICY)

    result = gpu_admission("check", "-o", "junit", "--policy", "policy.yaml", "manifests")

    root = ET.fromstring(result.stdout.encode("utf-8"))
    assert result.returncode == 2
    assert result.stderr.startswith("gpu-admission: policy.yaml:6: ")
    assert (root.get("tests"), root.get("errors")) == ("1", "1")
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "policy.yaml"
    assert suite.find("testcase/error") is not None


def test_check_prints_a_line_per_object_and_only_the_denied_when_asked(
    gpu_admission: GpuAdmission, manifests: Path
) -> None:
    short = gpu_admission("check", "manifests")
    only_denied = gpu_admission("check", "--only-denied", "manifests")

    assert (short.returncode, only_denied.returncode) == (1, 1)
    denied = (
        "DENIED   Pod/by-hand  manifests/apps/deep/by-hand.yaml:2  visible-devices: "
        "container 'cuda' sets NVIDIA_VISIBLE_DEVICES=all, "
    )
    assert short.stdout.startswith(denied)
    assert short.stdout.splitlines()[1:] == [
        "allowed  Pod/etl  manifests/cpu.yaml:1",
        "2 pods: 1 allowed, 1 denied",
    ]
    assert only_denied.stdout.startswith(denied)
    assert only_denied.stdout.splitlines()[1:] == ["2 pods: 1 allowed, 1 denied"]


def test_check_reads_files_named_as_kubectl_names_them(gpu_admission: GpuAdmission) -> None:
    write(gpu_admission.cwd / "by-hand.yaml", VISIBLE_DEVICES_POD)

    result = subprocess.run(
        [str(INSTALLED), "check", "-f", "by-hand.yaml", "--filename", "-", "-o", "json"],
        input=CPU_POD,
        capture_output=True,
        text=True,
        cwd=gpu_admission.cwd,
        env=gpu_admission.environment(),
        timeout=60,
    )

    report = json.loads(result.stdout)
    assert result.returncode == 1
    assert [(p["source"], p["verdict"]) for p in report["pods"]] == [
        ("by-hand.yaml", "denied"),
        ("-", "allowed"),
    ]


def test_check_print_schema_describes_the_report_check_prints(
    gpu_admission: GpuAdmission, manifests: Path
) -> None:
    from webhook.offline.report_schema import CHECK_SCHEMA, SCHEMAS, validate_check_report

    schema = gpu_admission("check", "--print-schema")
    report = gpu_admission("check", "-o", "json", "manifests", "missing.yaml")
    helped = gpu_admission("check", "--help")

    assert schema.returncode == 0
    assert schema.stdout == (SCHEMAS / CHECK_SCHEMA).read_text("utf-8")
    assert json.loads(schema.stdout)["title"] == "CheckReport"
    validate_check_report(json.loads(report.stdout))
    assert "gpu-admission check --print-schema" in helped.stdout
    assert ".py" not in helped.stdout


def test_explain_says_which_warnings_kubectl_would_print(
    gpu_admission: GpuAdmission, warn_policy: Path
) -> None:
    write(gpu_admission.cwd / "big.yaml", NINE_GPUS_POD)

    result = gpu_admission("explain", "--policy", "warn.yaml", "big.yaml")

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("training pod 'big' would be admitted.")
    assert (
        "\n\nkubectl would print 1 warning:\n"
        "  Warning: gpu-admission: gpu-count: pod requests 9 nvidia.com/gpu"
    ) in result.stdout


# --- policy validate, test and schema ----------------------------------------------------

BROKEN_POLICY = """\
apiVersion: gpu-admission.io/v1alpha1
kind: Policy
pools:
  inference:
    gpusPerNode: 8
    gpusPerNode: 4
    models: {A100: {product: A100-SXM4-40GB}}
classes:
  inference:
    pools: [inferense]
    priorityClass: {name: inference-priority, value: 1000000}
    defaultGpu: 1
"""


def test_policy_validate_lists_every_problem_with_its_line_and_a_duplicate_key(
    gpu_admission: GpuAdmission,
) -> None:
    initialised = gpu_admission("policy", "init", "good.yaml")
    write(gpu_admission.cwd / "broken.yaml", BROKEN_POLICY)

    result = gpu_admission("policy", "validate", "good.yaml", "broken.yaml")

    assert (initialised.returncode, initialised.stderr) == (0, "")
    assert result.returncode == 1
    assert result.stdout == "good.yaml: ok (2 pools, 2 classes)\n"
    assert result.stderr.splitlines() == [
        "broken.yaml:6: pools.inference.gpusPerNode: duplicate key 'gpusPerNode': "
        "given at line 5 and again at line 6; YAML would keep only the last",
        "broken.yaml:10: classes.inference.pools[0]: unknown pool 'inferense'; pools: inference",
        "broken.yaml:12: classes.inference.defaultGpu: "
        "unknown key 'defaultGpu' in classes.inference; did you mean 'defaultGpus'?",
    ]


def test_policy_test_junit_passes_the_shipped_cases(gpu_admission: GpuAdmission) -> None:
    result = gpu_admission("policy", "test", "--output", "junit", str(POLICY_CASES))

    root = ET.fromstring(result.stdout.encode("utf-8"))
    cases = sorted(path.name for path in POLICY_CASES.glob("*.yaml"))
    assert (result.returncode, result.stderr) == (0, "")
    assert (root.get("name"), root.get("failures"), root.get("errors")) == (
        "gpu-admission policy test",
        "0",
        "0",
    )
    assert [case.get("name") for case in root.findall("testsuite/testcase")] == cases


def test_policy_test_junit_fails_a_case_with_expected_against_got(
    gpu_admission: GpuAdmission,
) -> None:
    cases = gpu_admission.cwd / "cases"
    case = yaml.safe_load((POLICY_CASES / "training-job-nine-gpus-denied.yaml").read_text("utf-8"))
    write(cases / "nine-gpus.yaml", yaml.safe_dump({**case, "expect": "allowed"}))
    write(cases / "cpu.yaml", (POLICY_CASES / "cpu-pod-allowed.yaml").read_text("utf-8"))
    write(cases / "not-a-case.yaml", "expect: maybe\n")

    result = gpu_admission("policy", "test", "-o", "junit", "cases")

    root = ET.fromstring(result.stdout.encode("utf-8"))
    # A case that cannot be run is broken input: 2, which wins over the failure's 1.
    assert (result.returncode, result.stderr) == (2, "")
    [suite] = root.findall("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        "cases",
        "3",
        "1",
        "1",
    )
    [failure] = suite.findall("testcase[@name='nine-gpus.yaml']/failure")
    assert failure.get("message", "").startswith(
        "expected allowed, got denied (gpu-admission denied Job 'default/resnet-train' template "
        "(spec.template): "
    )
    assert suite.findall("testcase[@name='cpu.yaml']/*") == suite.findall(
        "testcase[@name='cpu.yaml']/properties"
    )
    [error] = suite.findall("testcase[@name='not-a-case.yaml']/error")
    assert error.get("message", "").startswith("invalid case: ")


def test_policy_validate_reads_standard_input_and_a_folder(gpu_admission: GpuAdmission) -> None:
    write(gpu_admission.cwd / "policies" / "good.yaml", default_policy_text())
    write(gpu_admission.cwd / "policies" / "tests" / "case.yaml", "expect: allowed\n")

    piped = subprocess.run(
        [str(INSTALLED), "policy", "validate", "-"],
        input=default_policy_text(),
        capture_output=True,
        text=True,
        cwd=gpu_admission.cwd,
        env=gpu_admission.environment(),
        timeout=60,
    )
    folder = gpu_admission("policy", "validate", "policies", "missing.yaml")

    assert (piped.returncode, piped.stdout) == (0, "-: ok (2 pools, 2 classes)\n")
    assert folder.returncode == 1
    assert folder.stdout == "policies/good.yaml: ok (2 pools, 2 classes)\n"
    # The copy names the schema.json of the shipped policy's folder, which is not beside it.
    assert folder.stderr.splitlines() == [
        "policies/good.yaml:1: warning: $schema=schema.json names policies/schema.json, which "
        "is not there: editors check this policy against no schema; write it with "
        "`gpu-admission policy schema --output-file policies/schema.json` (`gpu-admission "
        "policy init FILE` writes a policy and its schema together)",
        "missing.yaml: cannot read: no such file or folder",
    ]
    assert "Errno" not in piped.stderr + folder.stderr


def test_policy_test_runs_a_single_file_and_selects_cases_by_name(
    gpu_admission: GpuAdmission,
) -> None:
    single = gpu_admission("policy", "test", str(POLICY_CASES / "cpu-pod-allowed.yaml"))
    selected = gpu_admission(
        "policy", "test", "-o", "json", "--run", "denied[.]yaml$", str(POLICY_CASES)
    )

    report = json.loads(selected.stdout)
    denied = sorted(p.name for p in POLICY_CASES.glob("*-denied.yaml"))
    assert (single.returncode, single.stdout.splitlines()[-1]) == (0, "1 cases: 1 passed, 0 failed")
    assert selected.returncode == 0
    assert [case["name"] for case in report["cases"]] == denied
    assert report["summary"] == {
        "cases": len(denied),
        "passed": len(denied),
        "failed": 0,
        "errors": 0,
    }


def test_policy_schema_takes_its_path_from_output_file_and_refuses_the_old_spelling(
    gpu_admission: GpuAdmission,
) -> None:
    written = gpu_admission("policy", "schema", "--output-file", "schema.json")
    refused = gpu_admission("policy", "schema", "-o", "old.json")

    assert (written.returncode, written.stdout) == (0, "wrote schema.json\n")
    assert json.loads((gpu_admission.cwd / "schema.json").read_text("utf-8"))["title"] == (
        "gpu-admission policy"
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: gpu-admission policy schema ")
    assert refused.stderr.endswith("use --output-file old.json\n")
    assert not (gpu_admission.cwd / "old.json").exists()


@pytest.mark.parametrize(
    "command", [["check"], ["policy", "test"], ["policy", "validate"], ["audit"], ["serve"]]
)
def test_an_unknown_option_prints_the_usage_of_the_command_it_was_given_to(
    gpu_admission: GpuAdmission, command: list[str]
) -> None:
    result = gpu_admission(*command, "--no-such-option")

    name = " ".join(command)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"usage: gpu-admission {name} ")
    assert result.stderr.endswith(
        f"gpu-admission {name}: error: unrecognized arguments: --no-such-option\n"
    )


def test_the_help_of_serve_shows_its_defaults(gpu_admission: GpuAdmission) -> None:
    result = gpu_admission("serve", "--help")

    text = " ".join(result.stdout.split())
    assert result.returncode == 0
    for default in [
        "(default: 127.0.0.1)",
        "(default: 8443)",
        "(default: info)",
        "(default: 9090)",
    ]:
        assert default in text


def test_policy_schema_goes_to_standard_output(gpu_admission: GpuAdmission) -> None:
    result = gpu_admission("policy", "schema")

    schema = json.loads(result.stdout)
    assert (result.returncode, result.stderr) == (0, "")
    assert schema["title"] == "gpu-admission policy"
    assert "$schema" in schema
    assert list(gpu_admission.cwd.iterdir()) == []


# --- manifests ---------------------------------------------------------------------------


@pytest.fixture
def repository_copy(tmp_path: Path) -> Path:
    """A copy of the repository's deploy/ and pyproject.toml: a repository to the command."""
    copy = tmp_path / "repository"
    shutil.copytree(REPOSITORY / "deploy", copy / "deploy")
    shutil.copy(REPOSITORY / "pyproject.toml", copy / "pyproject.toml")
    write(copy / "docs" / "guide" / "README.md", "")
    return copy


def test_manifests_sync_check_finds_the_repository_from_a_subfolder(
    gpu_admission: GpuAdmission, repository_copy: Path
) -> None:
    subfolder = repository_copy / "docs" / "guide"
    webhooks = repository_copy / "deploy" / "base" / "webhooks.yaml"
    # Whatever the repository's state, the copy is brought up to date with the package.
    assert gpu_admission("manifests", "sync", cwd=repository_copy / "deploy").returncode == 0

    fresh = gpu_admission("manifests", "sync", "--check", cwd=subfolder)
    webhooks.write_text(webhooks.read_text("utf-8") + "# edited by hand\n", "utf-8")
    stale = gpu_admission("manifests", "sync", "--check", cwd=subfolder)

    assert (fresh.returncode, fresh.stdout, fresh.stderr) == (0, "", "")
    assert (stale.returncode, stale.stderr) == (1, "")
    assert stale.stdout == f"{webhooks}: stale, run `gpu-admission manifests sync`\n"
    assert webhooks.read_text("utf-8").endswith("# edited by hand\n")


def test_manifests_sync_outside_a_repository_asks_for_the_deploy_dir(
    gpu_admission: GpuAdmission,
) -> None:
    result = gpu_admission("manifests", "sync", "--check")

    assert result.returncode == 2
    assert result.stderr.startswith(f"gpu-admission: no deploy/ directory in {gpu_admission.cwd}")
    assert result.stderr.endswith("; run in the repository or pass --deploy-dir\n")
    assert result.stderr.count("\n") == 1


# --- install and the commands that talk to a cluster -------------------------------------


@pytest.mark.parametrize("credentials", ["none", "unreachable"])
def test_install_client_dry_run_prints_the_objects_without_a_cluster(
    gpu_admission: GpuAdmission, tmp_path: Path, credentials: str
) -> None:
    env = {}
    if credentials == "unreachable":
        env["KUBECONFIG"] = str(unreachable_kubeconfig(tmp_path / "kubeconfig")[0])

    result = gpu_admission("install", "--dry-run=client", env=env)

    objects = list(yaml.safe_load_all(result.stdout))
    kinds = [obj["kind"] for obj in objects]
    assert result.returncode == 0
    assert result.stderr.startswith("gpu-admission install: client dry run, nothing sent.")
    assert result.stderr.count("\n") == 1
    assert all(obj["apiVersion"] and obj["metadata"]["name"] for obj in objects)
    assert kinds[0] == "Namespace"
    assert {"Deployment", "Service", "ConfigMap", "PriorityClass"} <= set(kinds)
    assert kinds[-2:] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["install"], 1),
        (["audit"], 2),
        (["audit", "-n", "team-a"], 2),
        (["certs", "rotate", "--namespace", "gpu-admission", "--secret", "gpu-admission-tls"], 1),
    ],
    ids=["install", "audit", "audit-namespace", "certs-rotate"],
)
def test_an_unreachable_cluster_is_one_line_without_a_traceback(
    gpu_admission: GpuAdmission, tmp_path: Path, args: list[str], code: int
) -> None:
    kubeconfig, server = unreachable_kubeconfig(tmp_path / "kubeconfig")

    result = gpu_admission(*args, "--kubeconfig", str(kubeconfig))

    command = " ".join(word for word in args[:2] if not word.startswith("-"))
    assert (result.returncode, result.stdout) == (code, "")
    assert result.stderr == (
        f"gpu-admission {command}: cannot reach the API server at {server}: connection refused\n"
    )
