"""The JUnit XML of `check --output junit` and `policy test --output junit`
(webhook/offline/junit.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.builders import container, pod
from webhook.engine import Engine
from webhook.offline.cases import CaseResult
from webhook.offline.documents import Document, read_documents
from webhook.offline.evaluation import Report, evaluate
from webhook.offline.junit import cases_junit, report_junit
from webhook.policy.load import default_policy_text, load_policy_text

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm-server}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata:
      labels: {app: llm, gpu-admission.io/workload: inference}
    spec:
      containers: [{name: server, image: llm:1, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: Service
metadata: {name: llm-server}
"""


@pytest.fixture
def report(engine: Engine) -> Report:
    nine = pod("training", name="big", containers=[container(gpus=9)])
    documents = [
        *read_documents(DEPLOYMENT, "apps/llm.yaml"),
        Document("jobs/train.yaml", 3, nine),
    ]
    return evaluate(engine, documents)


def parsed(text: str) -> ET.Element:
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    return ET.fromstring(text.encode("utf-8"))


def test_each_file_is_a_testsuite_and_each_pod_or_object_a_testcase(report: Report) -> None:
    root = parsed(report_junit(report, ["apps/llm.yaml", "jobs/train.yaml", "empty.yaml"]))

    assert root.tag == "testsuites"
    assert root.attrib == {
        "name": "gpu-admission check", "tests": "3", "failures": "1", "errors": "0", "skipped": "1",
    }  # fmt: skip
    suites = root.findall("testsuite")
    assert [
        (s.get("name"), s.get("tests"), s.get("failures"), s.get("skipped")) for s in suites
    ] == [
        ("apps/llm.yaml", "2", "0", "1"),
        ("jobs/train.yaml", "1", "1", "0"),
        ("empty.yaml", "0", "0", "0"),
    ]
    assert [c.get("name") for c in suites[0].findall("testcase")] == [
        "Deployment 'llm-server' /spec/template (line 1)",
        "Service 'llm-server' (line 12)",
    ]
    assert {c.get("classname") for c in suites[0].findall("testcase")} == {"apps/llm.yaml"}


def test_the_policy_is_a_property_of_each_testsuite(report: Report) -> None:
    root = parsed(report_junit(report))

    for suite in root.findall("testsuite"):
        [prop] = suite.findall("properties/property")
        assert prop.attrib == {"name": "policy", "value": "policies/default.yaml (embedded)"}


def test_a_denied_pod_fails_with_the_denial_and_its_failed_rules(report: Report) -> None:
    [denied] = [p for p in report.pods if not p.allowed]
    root = parsed(report_junit(report))

    [failure] = root.findall(".//testcase[@name=\"Pod 'big' (line 3)\"]/failure")

    assert failure.get("type") == "denied"
    assert failure.get("message") == denied.message
    assert failure.text is not None
    assert failure.text.startswith("gpu-count: pod requests 9 nvidia.com/gpu;")


def test_an_object_without_a_pod_template_is_skipped_with_the_reason(report: Report) -> None:
    root = parsed(report_junit(report))

    [skipped] = root.findall(".//testcase/skipped")

    assert skipped.get("message") == "v1 Service has no pod template"


def test_a_malformed_object_fails_as_malformed(engine: Engine) -> None:
    workload = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": []}}  # fmt: skip
    report = evaluate(engine, [Document("job.yaml", 1, workload)])

    [failure] = parsed(report_junit(report)).findall(".//failure")

    assert failure.get("type") == "malformed"
    assert failure.get("message", "").startswith("malformed object:")


def test_warnings_are_the_testcases_output_and_properties() -> None:
    engine = Engine(
        load_policy_text(
            default_policy_text() + "\nenforcement:\n  rules: {gpu-count: warn}\n", "warn.yaml"
        )
    )
    report = evaluate(
        engine,
        [Document("big.yaml", 1, pod("training", name="big", containers=[container(gpus=9)]))],
    )
    [warning] = report.pods[0].warnings

    [case] = parsed(report_junit(report)).findall(".//testcase")

    assert case.find("failure") is None
    assert case.findtext("system-out") == f"Warning: {warning}\n"
    assert [p.attrib for p in case.findall("properties/property")] == [
        {"name": "warning", "value": warning}
    ]


def test_markup_and_characters_xml_cannot_hold_still_make_valid_xml(engine: Engine) -> None:
    # A file name is written as given; messages quote a user's values with repr().
    source = 'x&y<z>"\x01\ud800.yaml'
    obj = pod("training", name='a<b>&"c"', containers=[container(gpus=9)])
    report = evaluate(engine, [Document(source, 1, obj)])

    root = parsed(report_junit(report, [source]))

    [suite] = root.findall("testsuite")
    assert suite.get("name") == 'x&y<z>"\\x01\\ud800.yaml'
    [case] = suite.findall("testcase")
    assert case.get("name") == "Pod 'a<b>&\"c\"' (line 1)"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == report.pods[0].message
    assert "'ml/a<b>&\"c\"'" in report.pods[0].message


CASE_RESULTS = [
    CaseResult("allowed.yaml", (), description="A CPU pod is left alone."),
    CaseResult(
        "jobs/nine.yaml",
        (
            "expected allowed, got denied (gpu-admission denied pod 'big': ...)",
            "expected rules to fail: none; failed: gpu-count",
        ),
    ),
    CaseResult("broken.yaml", ("invalid case: broken.yaml: expect: ...",), broken=True),
]


def test_the_case_folder_is_a_testsuite_and_each_case_a_testcase() -> None:
    root = parsed(cases_junit(CASE_RESULTS, "policies/tests", "policy.yaml"))

    counts = {"tests": "3", "failures": "1", "errors": "1", "skipped": "0"}
    assert root.attrib == {"name": "gpu-admission policy test", **counts}
    [suite] = root.findall("testsuite")
    assert suite.attrib == {"name": "policies/tests", **counts}
    assert [p.attrib for p in suite.findall("properties/property")] == [
        {"name": "policy", "value": "policy.yaml"}
    ]
    assert [(c.get("classname"), c.get("name")) for c in suite.findall("testcase")] == [
        ("policies/tests", "allowed.yaml"),
        ("policies/tests", "jobs/nine.yaml"),
        ("policies/tests", "broken.yaml"),
    ]


def test_a_passing_case_has_its_description_and_no_failure() -> None:
    [case] = parsed(cases_junit(CASE_RESULTS[:1], "t", "p")).findall(".//testcase")

    assert list(case) == case.findall("properties")
    assert [p.attrib for p in case.findall("properties/property")] == [
        {"name": "description", "value": "A CPU pod is left alone."}
    ]


def test_a_case_that_differs_fails_with_each_expected_against_got() -> None:
    [case] = parsed(cases_junit(CASE_RESULTS[1:2], "t", "p")).findall(".//testcase")

    [failure] = case.findall("failure")
    assert case.find("properties") is None
    assert failure.get("type") == "mismatch"
    assert failure.get("message") == "; ".join(CASE_RESULTS[1].problems)
    assert failure.text == (
        "expected allowed, got denied (gpu-admission denied pod 'big': ...)\n"
        "expected rules to fail: none; failed: gpu-count\n"
    )


def test_a_case_that_cannot_be_run_is_an_error_not_a_failure() -> None:
    [case] = parsed(cases_junit(CASE_RESULTS[2:], "t", "p")).findall(".//testcase")

    assert case.find("failure") is None
    error = case.find("error")
    assert error is not None
    assert (error.get("type"), error.get("message")) == (
        "broken",
        "invalid case: broken.yaml: expect: ...",
    )


def test_no_cases_is_an_empty_testsuite() -> None:
    root = parsed(cases_junit([], "t", "p"))

    [suite] = root.findall("testsuite")
    assert (root.get("tests"), suite.get("tests"), suite.findall("testcase")) == ("0", "0", [])
