"""Audit before enforce, on the real control plane: `gpu-admission audit` and `serve --audit-interval`.

Some 350 pods and two workloads are created in namespaces that have not opted in, so
no webhook sees them (as in a cluster before gpu-admission is installed); then the
namespaces opt in, and the audit judges each as its CREATE would be judged today. The
scheduler may bind some pods and leave the rest Pending: the audit judges them alike.
What is created, and how many of each the audit must count, is the table below.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from webhook.kube.client import api_client

from .admission_fixtures import OPT_IN, REPO
from .controlplane import ControlPlane
from .nodes import NodeSpec
from .ports import free_ports
from .processes import Component
from .waiting import wait_for

pytestmark = pytest.mark.e2e

INFERENCE = {"gpu-admission.io/workload": "inference"}
TRAINING = {"gpu-admission.io/workload": "training"}
NAMESPACES = ("audit-team-a", "audit-team-b")
OUTSIDE = "audit-not-opted-in"
CRD = REPO / "deploy" / "audit" / "policyreports.yaml"


@dataclass(frozen=True)
class Batch:
    """`count` pods made alike, and what the audit must make of each."""

    namespace: str
    prefix: str
    count: int
    labels: dict[str, str]
    gpus: int
    env: tuple[tuple[str, str], ...] = ()
    verdict: str = "passed"
    failed_rule: str | None = None


BATCHES = (
    Batch("audit-team-a", "llm", 200, INFERENCE, 1),
    Batch("audit-team-a", "etl", 50, {}, 0),
    Batch("audit-team-a", "peek", 30, {}, 0, (("NVIDIA_VISIBLE_DEVICES", "all"),), "denied", "visible-devices"),
    Batch("audit-team-a", "nolabel", 20, {}, 1, verdict="denied", failed_rule="workload-class"),
    Batch("audit-team-b", "huge", 40, TRAINING, 9, verdict="denied", failed_rule="gpu-count"),
    Batch("audit-team-b", "train", 10, TRAINING, 2),
    Batch(OUTSIDE, "peek-out", 5, {}, 0, (("NVIDIA_VISIBLE_DEVICES", "all"),), "denied", "visible-devices"),
)  # fmt: skip
PODS_IN_SCOPE = sum(b.count for b in BATCHES if b.namespace in NAMESPACES)


def pod(batch: Batch, index: int) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(batch.gpus)}} if batch.gpus else {}
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": resources}
    if batch.env:
        container["env"] = [{"name": k, "value": v} for k, v in batch.env]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{batch.prefix}-{index}", "labels": dict(batch.labels)},
        "spec": {"containers": [container], "terminationGracePeriodSeconds": 0},
    }


def template(labels: dict[str, str], gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "x", **labels}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                }
            ],
        },
    }


# A Deployment scaled to zero whose template has GPUs and no class (denied), and a
# suspended CronJob of well-formed training pods (passed): judged by their templates.
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "unclassed", "namespace": "audit-team-b"},
    "spec": {
        "replicas": 0,
        "selector": {"matchLabels": {"app": "x"}},
        "template": {**template({}, 1), "spec": {**template({}, 1)["spec"], "restartPolicy": "Always"}},
    },
}  # fmt: skip
CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "nightly", "namespace": "audit-team-b"},
    "spec": {
        "schedule": "0 3 * * *",
        "suspend": True,
        "jobTemplate": {"spec": {"template": template(TRAINING, 4)}},
    },
}

FOREIGN_REPORT = {
    "apiVersion": "wgpolicyk8s.io/v1alpha2",
    "kind": "PolicyReport",
    "metadata": {
        "name": "someone-elses",
        "namespace": OUTSIDE,
        "labels": {"app.kubernetes.io/managed-by": "gpu-admission"},
    },
    "summary": {"pass": 1},
    "results": [],
}
"""A report a tenant labelled as ours in its namespace: the service must leave it alone."""


@pytest.fixture(scope="module")
def running(controlplane: ControlPlane, gpu_fleet: list[NodeSpec]) -> Iterator[None]:
    """The pods and workloads, created while their namespaces had not opted in, then the
    namespaces opted in (all but OUTSIDE)."""
    controlplane.apply((REPO / "deploy" / "base" / "priorityclasses.yaml").read_text("utf-8"))
    for namespace in (*NAMESPACES, OUTSIDE):
        controlplane.create_namespace(namespace)
    api = api_client(controlplane.kubeconfig)
    try:
        core = client.CoreV1Api(api)
        for batch in BATCHES:
            for index in range(batch.count):
                core.create_namespaced_pod(batch.namespace, pod(batch, index))
        client.AppsV1Api(api).create_namespaced_deployment("audit-team-b", DEPLOYMENT)
        client.BatchV1Api(api).create_namespaced_cron_job("audit-team-b", CRONJOB)
    finally:
        api.close()
    for namespace in NAMESPACES:
        controlplane.create_namespace(namespace, OPT_IN)
    try:
        yield
    finally:
        for namespace in (*NAMESPACES, OUTSIDE):
            controlplane.delete_namespace(namespace, wait=False)


def audit(controlplane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "webhook.cli", "audit", "--kubeconfig", str(controlplane.kubeconfig), *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def expected_verdicts(namespace: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for batch in BATCHES:
        if batch.namespace == namespace:
            counts[batch.verdict] += batch.count
    if namespace == "audit-team-b":
        counts["denied"] += 1  # the Deployment's template
        counts["passed"] += 1  # the CronJob's
    return counts


def expected_failures() -> Counter[str]:
    counts: Counter[str] = Counter()
    for batch in BATCHES:
        if batch.namespace in NAMESPACES and batch.failed_rule:
            counts[batch.failed_rule] += batch.count
    counts["workload-class"] += 1  # the Deployment's template
    return counts


def in_scope(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["namespace"] in NAMESPACES]


def test_the_summary_counts_what_was_created_by_namespace_and_by_rule(
    controlplane: ControlPlane, running: None
) -> None:
    done = audit(controlplane, "--output", "json")

    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "AuditReport"
    assert set(NAMESPACES) <= set(report["scope"]["namespaces"])
    assert OUTSIDE not in report["scope"]["namespaces"]
    for namespace in NAMESPACES:
        counts = report["summary"]["namespaces"][namespace]
        expected = expected_verdicts(namespace)
        assert counts["judged"] == sum(expected.values()), namespace
        assert {v: counts[v] for v in expected} == dict(expected), namespace
        assert counts["warned"] == counts["audited"] == counts["exempted"] == 0
    results = in_scope(report["results"])
    assert len(results) == PODS_IN_SCOPE + 2
    failed = Counter(r["rule"] for f in results for r in f["rules"] if r["outcome"] == "fail")
    assert failed == expected_failures()
    workloads = {(f["kind"], f["name"]): f for f in results if f["kind"] != "Pod"}
    assert workloads[("Deployment", "unclassed")]["template"] == "spec.template"
    assert workloads[("Deployment", "unclassed")]["verdict"] == "denied"
    assert workloads[("CronJob", "nightly")]["template"] == "spec.jobTemplate.spec.template"
    assert workloads[("CronJob", "nightly")]["verdict"] == "passed"


def test_pods_never_mutated_are_judged_with_the_mutation_their_create_would_get(
    controlplane: ControlPlane, running: None
) -> None:
    stored = controlplane.get_json("pod", "llm-0", "audit-team-a")
    report = json.loads(audit(controlplane, "--output", "json").stdout)

    [llm] = [r for r in report["results"] if r["name"] == "llm-0"]
    assert "priorityClassName" not in stored["spec"]  # never mutated
    assert llm["verdict"] == "passed"
    assert {r["rule"]: r["outcome"] for r in llm["rules"]}["priority-class"] == "pass"
    assert "CREATE" in report["judgedAs"]


def test_only_denied_lists_the_denied_alone_in_text_and_in_json(
    controlplane: ControlPlane, running: None
) -> None:
    text = audit(controlplane, "--only-denied")
    as_json = audit(controlplane, "--only-denied", "--output", "json")

    denied = sum(expected_verdicts(n)["denied"] for n in NAMESPACES)
    assert text.returncode == as_json.returncode == 1
    listed = [line for line in text.stdout.splitlines() if line.startswith("  ")]
    assert len([line for line in listed if "'audit-team-" in line]) == denied
    assert "RULE" in text.stdout and "NAMESPACE" in text.stdout
    assert "WARNED (" not in text.stdout
    assert "Judged: each pod as the webhooks would judge its CREATE today" in text.stdout
    results = in_scope(json.loads(as_json.stdout)["results"])
    assert len(results) == denied
    assert {r["verdict"] for r in results} == {"denied"}


def test_all_namespaces_previews_the_namespaces_not_opted_in(
    controlplane: ControlPlane, running: None
) -> None:
    done = audit(controlplane, "--all-namespaces", "--output", "json")

    report = json.loads(done.stdout)
    assert report["scope"]["allNamespaces"] is True
    assert report["summary"]["namespaces"][OUTSIDE]["denied"] == 5
    assert "kube-system" not in report["summary"]["namespaces"]


def test_opted_in_namespaces_below_pod_security_baseline_are_named(
    controlplane: ControlPlane, running: None
) -> None:
    label = "pod-security.kubernetes.io/enforce"
    controlplane.kubectl("label", "namespace", "audit-team-a", f"{label}=baseline")
    try:
        done = audit(controlplane, "--output", "json")
        text = audit(controlplane)
    finally:
        controlplane.kubectl("label", "namespace", "audit-team-a", f"{label}-")

    below = {
        e["namespace"]: e["reason"] for e in json.loads(done.stdout)["belowPodSecurityBaseline"]
    }
    assert "audit-team-a" not in below
    assert below["audit-team-b"].startswith(f"no {label} label")
    assert OUTSIDE not in below  # not opted in, not audited
    assert "NAMESPACES BELOW POD SECURITY BASELINE" in text.stdout
    assert "  audit-team-b: no pod-security.kubernetes.io/enforce label" in text.stdout


def test_the_service_publishes_policy_reports_and_metrics_once_the_crd_is_there(
    controlplane: ControlPlane, running: None, tmp_path: Path
) -> None:
    https, metrics = free_ports(2)
    command = [
        "env", f"XDG_CACHE_HOME={tmp_path / 'cache'}",
        sys.executable, "-m", "webhook.cli", "serve",
        "--port", str(https), "--metrics-port", str(metrics),
        "--kubeconfig", str(controlplane.kubeconfig), "--audit-interval", "3",
    ]  # fmt: skip
    service = Component("gpu-admission-audit", command, tmp_path / "serve.log")
    service.start()
    try:
        wait_for(lambda: "PolicyReport CRD" in service.log_tail(), 60, "the log line of no CRD")
        controlplane.kubectl("apply", "-f", str(CRD))
        wait_for(
            lambda: controlplane.apply(json.dumps(FOREIGN_REPORT), check=False).returncode == 0,
            30,
            "the PolicyReport kind to be served",
        )
        reports = wait_for(
            lambda: _reports(controlplane), 90, "a PolicyReport in each audited namespace",
            describe_last=service.log_tail,
        )  # fmt: skip
        exposition = _scrape(metrics)
        controlplane.create_namespace("audit-team-b", {})  # opted out again
        wait_for(
            lambda: not controlplane.exists("policyreport", "gpu-admission", "audit-team-b"),
            60,
            "the report of a namespace no longer audited to go",
            describe_last=service.log_tail,
        )
        foreign_kept = controlplane.exists("policyreport", "someone-elses", OUTSIDE)
    finally:
        service.stop()
        controlplane.create_namespace("audit-team-b", OPT_IN)
        controlplane.kubectl("delete", "-f", str(CRD), "--ignore-not-found")

    assert foreign_kept, "a labelled report of another name was deleted"
    a, b = reports["audit-team-a"], reports["audit-team-b"]
    assert a["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-admission"}
    failures = Counter(
        (r["rule"], r["resources"][0]["namespace"])
        for report in (a, b)
        for r in report["results"]
        if r["result"] == "fail"
    )
    assert failures == {
        ("visible-devices", "audit-team-a"): 30,
        ("workload-class", "audit-team-a"): 20,
        ("gpu-count", "audit-team-b"): 40,
        ("workload-class", "audit-team-b"): 1,
    }
    assert a["summary"]["fail"] == 50 and b["summary"]["fail"] == 41
    assert a["summary"]["error"] == b["summary"]["error"] == 0
    assert len(a["results"]) == 500  # capped: broken rules first, then passes
    assert int(a["metadata"]["annotations"]["gpu-admission.io/results-omitted"]) > 0
    [peek] = [r for r in a["results"] if r["resources"][0]["name"] == "peek-0"]
    assert peek["policy"] == "gpu-admission"
    assert peek["properties"] == {"mode": "enforce"}
    assert peek["resources"][0]["kind"] == "Pod" and peek["resources"][0]["uid"]
    assert "NVIDIA_VISIBLE_DEVICES" in peek["message"]
    assert 'gpu_admission_audit_rule_results{result="fail",rule="gpu-count"}' in exposition
    assert 'gpu_admission_audit_runs_total{result="success"}' in exposition
    denied = _sample(exposition, 'gpu_admission_audit_verdicts{verdict="denied"}')
    assert denied >= sum(expected_verdicts(n)["denied"] for n in NAMESPACES)


GRANTS = {
    ("list", "policyreports.wgpolicyk8s.io"): "yes",
    ("create", "policyreports.wgpolicyk8s.io"): "yes",
    ("update", "policyreports.wgpolicyk8s.io/gpu-admission"): "yes",
    ("delete", "policyreports.wgpolicyk8s.io/gpu-admission"): "yes",
    ("update", "policyreports.wgpolicyk8s.io/someone-elses"): "no",
    ("delete", "policyreports.wgpolicyk8s.io/someone-elses"): "no",
    ("list", "pods"): "yes",
    ("list", "cronjobs.batch"): "yes",
    ("delete", "pods"): "no",
}


def test_the_service_account_may_write_only_its_own_policy_reports(
    controlplane: ControlPlane,
) -> None:
    """As deploy/base/rbac.yaml grants it, once the CRD makes the kind known to kubectl
    (tests/e2e/test_deploy.py asks the rest)."""
    rbac = REPO / "deploy" / "base" / "rbac.yaml"
    had_role = controlplane.exists("clusterrolebinding", "gpu-admission")
    controlplane.kubectl("apply", "-f", str(CRD))
    controlplane.kubectl("apply", "-f", str(rbac), "--namespace", "gpu-admission", check=False)
    try:
        wait_for(
            lambda: "policyreports" in controlplane.kubectl("api-resources").stdout,
            30,
            "the PolicyReport kind to be served",
        )
        answers = {
            (verb, resource): controlplane.kubectl(
                "auth", "can-i", verb, resource, "--namespace", "ml",
                "--as=system:serviceaccount:gpu-admission:gpu-admission", check=False,
            ).stdout.strip()
            for verb, resource in GRANTS
        }  # fmt: skip
    finally:
        controlplane.kubectl("delete", "-f", str(CRD), "--ignore-not-found")
        if not had_role:
            for kind in ("clusterrolebinding", "clusterrole"):
                controlplane.kubectl("delete", kind, "gpu-admission", "--ignore-not-found")

    assert answers == GRANTS


def _reports(controlplane: ControlPlane) -> dict[str, dict[str, Any]] | None:
    found = controlplane.kubectl(
        "get", "policyreports", "--all-namespaces", "-o", "json", check=False
    )
    if found.returncode != 0:
        return None
    reports = {
        r["metadata"]["namespace"]: r
        for r in json.loads(found.stdout)["items"]
        if r["metadata"]["name"] == "gpu-admission"
    }
    return reports if set(NAMESPACES) <= set(reports) else None


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode("utf-8"))


def _sample(exposition: str, series: str) -> float:
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {series} in the metrics")
