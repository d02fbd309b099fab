"""The JSON Schemas of the reports of `check` and `policy test` (`--output json|yaml`).

The shapes are declared once, as pydantic models that forbid any other key; the schema
files under webhook/offline/schemas/ are made from them (`write_schemas`, run by
tests/offline/test_report_schema.py when they are out of date) and ship in the package:
`gpu-admission check --print-schema` and `gpu-admission policy test --print-schema` print
them. A report validates against its model (`validate_check_report`), so a test proves
that what the commands print is what the schema says. Adding a key is a change of the
schema; removing or renaming one is a new apiVersion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from webhook.offline.cases import API_VERSION as TEST_API_VERSION
from webhook.offline.cases import KIND as TEST_KIND
from webhook.offline.report_data import API_VERSION, KIND

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS = Path(__file__).parent / "schemas"
CHECK_SCHEMA = "check-report.schema.json"
TEST_SCHEMA = "policy-test-report.schema.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ObjectData(_Strict):
    apiVersion: str
    kind: str
    namespace: str = Field(description='"" when the manifest gives none')
    name: str = Field(description="metadata.name, else metadata.generateName; may be empty")


class RuleData(_Strict):
    rule: str
    outcome: Literal["pass", "fail", "warn", "audit", "skip"]
    messages: list[str]


class ClaimSourceData(_Strict):
    kind: Literal["ResourceClaimTemplate", "ResourceClaim"]
    name: str


class PodClaimData(_Strict):
    name: str = Field(description="the claim's name in the pod")
    source: ClaimSourceData | None
    asks: list[str] = Field(description="what each request asks for")
    problem: str | None = Field(description="why what it asks is not known")


class PlacementData(_Strict):
    pool: str = Field(description='"" for a pool the policy does not name')
    model: str
    nodes: str = Field(description="which kind of node: listed, unlisted-model, ...")
    labels: dict[str, str]
    reachable: Literal["yes", "no", "unknown"]
    reasons: list[str]


class PodData(_Strict):
    """One Pod or pod template, as at its CREATE in an opted-in namespace."""

    source: str = Field(description='the file, or "-" for standard input')
    line: int = Field(ge=1, description="where the object starts")
    object: ObjectData
    template: str = Field(description='JSON pointer of the pod template ("" for a Pod)')
    workloadClass: str | None
    verdict: Literal["allowed", "denied"]
    message: str = Field(description='the denial as kube-apiserver prints it ("" if allowed)')
    warnings: list[str] = Field(
        description="each field Kubernetes does not know (`unknown field "
        '"spec.containers[0].resource" ...`), then what kubectl prints after `Warning: `'
    )
    rules: list[RuleData] = Field(description="every rule, in a fixed order; empty if malformed")
    claims: list[PodClaimData]
    patch: list[dict[str, Any]] = Field(description="JSONPatch of the mutation")
    diff: str = Field(description='unified diff of receivedPod to mutatedPod ("" if none)')
    placement: list[PlacementData]
    receivedPod: dict[str, Any]
    mutatedPod: dict[str, Any]


class ClaimObjectData(_Strict):
    """A ResourceClaimTemplate or ResourceClaim, as at its CREATE."""

    source: str
    line: int = Field(ge=1)
    object: ObjectData
    verdict: Literal["allowed", "denied"]
    message: str
    warnings: list[str]
    asks: list[str]


class SkippedData(_Strict):
    source: str
    line: int = Field(ge=1)
    object: ObjectData
    reason: str


class InputErrorData(_Strict):
    """A file that could not be read: nothing of it was judged."""

    source: str = Field(description='the file or folder, or "-" for standard input')
    line: int | None = Field(ge=1, description="where the problem is, if known")
    reason: str


class CheckSummary(_Strict):
    pods: int = Field(ge=0, description="pods and pod templates judged")
    allowed: int = Field(ge=0, description="pods and pod templates allowed")
    denied: int = Field(ge=0, description="pods and pod templates denied")
    warnings: int = Field(ge=0)
    skipped: int = Field(ge=0)
    claimObjects: int = Field(ge=0)
    claimObjectsDenied: int = Field(ge=0)
    errors: int = Field(ge=0, description="files that could not be read")


class CheckReport(_Strict):
    """The report of `gpu-admission check --output json|yaml`. With --only-denied, pods and
    claimObjects hold only the denied and skipped is empty; summary counts everything."""

    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["CheckReport"]
    policy: str = Field(description="where the policy came from")
    allowed: bool = Field(description="every pod and claim object judged is allowed")
    summary: CheckSummary
    pods: list[PodData]
    claimObjects: list[ClaimObjectData]
    skipped: list[SkippedData]
    errors: list[InputErrorData]


class CaseData(_Strict):
    name: str = Field(description="the case's path in its folder, or the file as given")
    description: str
    result: Literal["pass", "fail", "error"] = Field(
        description="fail: differs from what it expects; error: cannot be run"
    )
    problems: list[str] = Field(description="each difference, or why it cannot be run")


class TestSummary(_Strict):
    cases: int = Field(ge=0)
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    errors: int = Field(ge=0)


class PolicyTestReport(_Strict):
    """The report of `gpu-admission policy test --output json|yaml`."""

    apiVersion: Literal["gpu-admission.io/v1alpha1"]
    kind: Literal["PolicyTestReport"]
    policy: str
    passed: bool = Field(description="every case passes")
    summary: TestSummary
    cases: list[CaseData]


assert (API_VERSION, KIND) == ("gpu-admission.io/v1alpha1", "CheckReport")
assert (TEST_API_VERSION, TEST_KIND) == ("gpu-admission.io/v1alpha1", "PolicyTestReport")

MODELS: dict[str, type[BaseModel]] = {CHECK_SCHEMA: CheckReport, TEST_SCHEMA: PolicyTestReport}


def report_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, **schema}


def report_schema_text(name: str) -> str:
    """The schema file `name` as written: stable, indented JSON ending in a newline."""
    return json.dumps(report_schema(MODELS[name]), indent=2, ensure_ascii=False) + "\n"


def validate_check_report(data: Any) -> CheckReport:
    """`data` (a CheckReport read from JSON or YAML) read by its model; raises
    pydantic.ValidationError when it is not what the schema says."""
    return CheckReport.model_validate(data)


def validate_policy_test_report(data: Any) -> PolicyTestReport:
    return PolicyTestReport.model_validate(data)


def write_schemas() -> None:
    for name in MODELS:
        (SCHEMAS / name).write_text(report_schema_text(name), "utf-8")
