"""JUnit XML for a policy repository's CI: `check --output junit` and `policy test --output junit`.

`check`: one testsuite per manifest file, one testcase per pod or pod template (named as
the text report names it, `Deployment 'llm-server' /spec/template`, with its line) and per
ResourceClaimTemplate or ResourceClaim, so a CI dashboard lists the objects of each file
and marks the denied ones:

    <testsuites name="gpu-admission check" tests="3" failures="1" errors="0" skipped="1">
      <testsuite name="apps/llm.yaml" tests="3" failures="1" errors="0" skipped="1">
        <properties><property name="policy" value="policies/default.yaml (embedded)"/></properties>
        <testcase classname="apps/llm.yaml" name="Deployment 'llm-server' /spec/template (line 1)">
          <system-out>Warning: gpu-admission: mig-profile: ...</system-out>
        </testcase>
        <testcase ... name="Job 'train' /spec/template (line 21)">
          <failure type="denied" message="the denial, as kube-apiserver prints it">
            each failed rule and its messages</failure>
        </testcase>
        <testcase ... name="Service 'llm-server' (line 40)"><skipped message="..."/></testcase>
      </testsuite>
    </testsuites>

A testcase per object rather than per rule: a dozen rules pass for every pod, and a
list of them would bury the one object that fails; the failed rules are in the
failure's text. Warnings, which admit the pod, are the testcase's system-out (each
line as kubectl prints it) and each a `warning` property, since CI tools show one or
the other. A file without objects is an empty testsuite, so every file read is listed.
A file that cannot be read (missing, not YAML, a document that is not an object, a
folder without manifests) is a testsuite with one testcase, `(file)`, whose `error`
says why; the other files are still judged:

    <testsuite name="apps/broken.yaml" tests="1" failures="0" errors="1" skipped="0">
      <testcase classname="apps/broken.yaml" name="(file)">
        <error type="unreadable" message="apps/broken.yaml:2: not valid YAML: ..."/>
      </testcase>
    </testsuite>

A policy that cannot be loaded (`--policy`) judges nothing: the report is one
testsuite, the policy file, with one testcase in error (`policy_error_junit`).

`policy test`: one testsuite, the folder of cases, and one testcase per case file
(named by its path in the folder, its description a property). A case whose outcome
differs from what it expects fails with each difference, expected against got; a case
that cannot be run (unreadable, not a case, an object without pods) is an error:

    <testsuites name="gpu-admission policy test" tests="2" failures="1" errors="0" skipped="0">
      <testsuite name="policies/tests" tests="2" failures="1" errors="0" skipped="0">
        <properties><property name="policy" value="policies/default.yaml (embedded)"/></properties>
        <testcase classname="policies/tests" name="cpu-pod-allowed.yaml">...</testcase>
        <testcase classname="policies/tests" name="nine-gpus.yaml">
          <properties><property name="description" value="No node has nine GPUs"/></properties>
          <failure type="mismatch" message="expected allowed, got denied (...); expected rules ...">
            expected allowed, got denied (...)
            expected rules to fail: none; failed: gpu-count</failure>
        </testcase>
      </testsuite>
    </testsuites>

Characters XML 1.0 cannot hold (control characters, lone surrogates: in a file name,
say) are written as Python escapes them, `\\x07`, `\\ud800`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from webhook.offline.documents import ManifestError
from webhook.offline.evaluation import (
    ClaimObjectEvaluation,
    ObjectRef,
    PodEvaluation,
    Report,
    SkippedObject,
)

if TYPE_CHECKING:
    from webhook.offline.cases import CaseResult

SUITES_NAME = "gpu-admission check"
CASES_SUITES_NAME = "gpu-admission policy test"

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters outside XML 1.0's Char production; ElementTree would write them as they are."""


def report_junit(
    report: Report, sources: Sequence[str] = (), errors: Sequence[ManifestError] = ()
) -> str:
    """The JUnit XML of `report`; each of `sources` (the files read, in order) is a
    testsuite even without objects, and any other source of the report follows them;
    each of `errors` (a file that could not be read) is an error testcase of its file."""
    cases: dict[str, list[ET.Element]] = {source: [] for source in sources}
    counts: dict[str, dict[str, int]] = {}
    for error in errors:
        _add(cases, counts, error.source, _error_case(error.source, "unreadable", str(error)))
        counts[error.source]["errors"] += 1
    for evaluation in report.pods:
        case = _pod_case(evaluation)
        _add(cases, counts, evaluation.object.source, case, failed=not evaluation.allowed)
    for claim_object in report.claim_objects:
        case = _claim_object_case(claim_object)
        _add(cases, counts, claim_object.object.source, case, failed=not claim_object.allowed)
    for skipped in report.skipped:
        _add(cases, counts, skipped.object.source, _skipped_case(skipped), skipped=True)

    root = ET.Element("testsuites", name=SUITES_NAME)
    totals = _no_tests()
    for source, testcases in cases.items():
        count = counts.get(source, _no_tests())
        suite = _suite(root, source, report.policy, count)
        suite.extend(testcases)
        for key, value in count.items():
            totals[key] += value
    return _document(root, totals)


def cases_junit(results: Sequence[CaseResult], directory: str, policy: str) -> str:
    """The JUnit XML of `policy test`: the folder of cases `directory` run against `policy`
    (where it came from) is a testsuite, and each of `results` a testcase."""
    count = _no_tests()
    testcases = []
    for result in results:
        case = ET.Element("testcase", classname=_xml(directory), name=_xml(result.name))
        if result.description:
            properties = ET.SubElement(case, "properties")
            ET.SubElement(
                properties, "property", name="description", value=_xml(result.description)
            )
        count["tests"] += 1
        if result.problems:
            count["errors" if result.broken else "failures"] += 1
            problem = ET.SubElement(
                case,
                "error" if result.broken else "failure",
                type="broken" if result.broken else "mismatch",
                message=_xml("; ".join(result.problems)),
            )
            problem.text = _xml("".join(f"{line}\n" for line in result.problems))
        testcases.append(case)
    root = ET.Element("testsuites", name=CASES_SUITES_NAME)
    _suite(root, directory, policy, count).extend(testcases)
    return _document(root, count)


def policy_error_junit(suites_name: str, policy: str, message: str) -> str:
    """The JUnit XML of a run that judged nothing: the policy at `policy` cannot be
    loaded (`message` says why). One testsuite, the policy, one testcase in error."""
    count = {**_no_tests(), "tests": 1, "errors": 1}
    root = ET.Element("testsuites", name=suites_name)
    suite = _suite(root, policy, policy, count)
    suite.append(_error_case(policy, "policy", message, name="(policy)"))
    return _document(root, count)


def _error_case(classname: str, kind: str, message: str, name: str = "(file)") -> ET.Element:
    case = ET.Element("testcase", classname=_xml(classname), name=name)
    error = ET.SubElement(case, "error", type=kind, message=_xml(message))
    error.text = _xml(message + "\n")
    return case


def _no_tests() -> dict[str, int]:
    return {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}


def _suite(root: ET.Element, name: str, policy: str, count: dict[str, int]) -> ET.Element:
    """A testsuite of `root`, with its counts and the policy as its property."""
    suite = ET.SubElement(root, "testsuite", name=_xml(name))
    suite.attrib.update({key: str(value) for key, value in count.items()})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="policy", value=_xml(policy))
    return suite


def _document(root: ET.Element, totals: dict[str, int]) -> str:
    root.attrib.update({key: str(value) for key, value in totals.items()})
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _add(
    cases: dict[str, list[ET.Element]],
    counts: dict[str, dict[str, int]],
    source: str,
    case: ET.Element,
    failed: bool = False,
    skipped: bool = False,
) -> None:
    cases.setdefault(source, []).append(case)
    count = counts.setdefault(source, _no_tests())
    count["tests"] += 1
    count["failures"] += failed
    count["skipped"] += skipped


def _pod_case(evaluation: PodEvaluation) -> ET.Element:
    failure = None
    if not evaluation.allowed:
        kind = "denied" if evaluation.rules else "malformed"
        failure = (kind, evaluation.message, _failure_text(evaluation))
    return _verdict_case(evaluation.object, evaluation.describe, evaluation.warnings, failure)


def _claim_object_case(evaluation: ClaimObjectEvaluation) -> ET.Element:
    failure = None
    if not evaluation.allowed:
        kind = "denied" if evaluation.asks is not None else "malformed"
        failure = (kind, evaluation.message, evaluation.message + "\n")
    return _verdict_case(evaluation.object, evaluation.describe, evaluation.warnings, failure)


def _verdict_case(
    ref: ObjectRef, describe: str, warnings: tuple[str, ...], failure: tuple[str, str, str] | None
) -> ET.Element:
    """A testcase with each warning a property and the system-out, and the `failure`
    (type, message, text) of a denied object."""
    case = _case(ref, describe)
    if warnings:
        properties = ET.SubElement(case, "properties")
        for warning in warnings:
            ET.SubElement(properties, "property", name="warning", value=_xml(warning))
    if failure is not None:
        kind, message, text = failure
        element = ET.SubElement(case, "failure", type=kind, message=_xml(message))
        element.text = _xml(text)
    if warnings:
        out = ET.SubElement(case, "system-out")
        out.text = _xml("".join(f"Warning: {w}\n" for w in warnings))
    return case


def _failure_text(evaluation: PodEvaluation) -> str:
    failed = [outcome for outcome in evaluation.rules if outcome.outcome == "fail"]
    if not failed:
        return evaluation.message + "\n"
    lines = []
    for outcome in failed:
        lines += [f"{outcome.rule}: {message}" for message in outcome.messages] or [outcome.rule]
    return "\n".join(lines) + "\n"


def _skipped_case(skipped: SkippedObject) -> ET.Element:
    case = _case(skipped.object, skipped.object.describe)
    ET.SubElement(case, "skipped", message=_xml(skipped.reason))
    return case


def _case(ref: ObjectRef, describe: str) -> ET.Element:
    return ET.Element(
        "testcase", classname=_xml(ref.source), name=_xml(f"{describe} (line {ref.line})")
    )


def _xml(text: str) -> str:
    """`text` with each character XML cannot hold written as Python escapes it (ElementTree
    escapes the rest: &, <, > and quotes)."""
    return _NOT_XML.sub(lambda match: repr(match.group())[1:-1], text)
