"""`gpu-admission policy test`: a folder of cases, each an object and what must become of it.

A case is one YAML file:

    description: why the case exists (optional)
    object: a Pod, or a workload with pod templates (Deployment, Job, ...), or a
            ResourceClaimTemplate or ResourceClaim (judged as at its CREATE)
    workload: inference           # optional: the object's pods are of this class
    gpuModel: A100                # optional: ... and ask for this GPU model
    claims:                       # optional: the ResourceClaimTemplates and ResourceClaims
      - {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate, ...}  # its pods name
    expect: allowed | denied      # denied when any of its pods is denied
    rules: [gpu-count]            # optional: exactly the rules that must fail
    patch:                        # optional: operations the mutation must contain
      - {op: add, path: /spec/priorityClassName, value: inference-priority}
    pods:                         # optional: fragments some mutated pod must contain
      - spec: {priority: 1000000}

`workload` and `gpuModel` name a class of the policy and a model of its pools: the runner
writes them as the policy's own pod labels (`podLabels.workload`, `podLabels.gpuModel`)
into the object's pod labels, a Pod's or each pod template's
(webhook.offline.case_labels), so the cases hold for a copy of the policy whose label
keys are renamed. A case with one of them is refused when its object already carries that
label, or when the policy has no such class or model; an object may still carry the
labels itself, then under whatever key it writes.

A claim of Dynamic Resource Allocation naming an object not among `claims` (nor the
object itself) is not judged, as in `check`. `claims` are not judged themselves: a
case of its own judges one. Patch paths are relative to the pod (the mutation applies
to pods, also those made from a template). Fragments match as in webhook.offline.fragments:
mappings by their keys, lists by items found anywhere in the list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from webhook.engine import Engine
from webhook.engine.rules import RULES
from webhook.offline.case_labels import case_labels, labelled
from webhook.offline.case_wording import case_problem, unknown_rules
from webhook.offline.claim_documents import (
    VERSIONS,
    ClaimDocuments,
    is_claim_object,
    unread_version,
)
from webhook.offline.documents import STDIN, Document, ManifestError, read_yaml
from webhook.offline.evaluation import ClaimObjectEvaluation, PodEvaluation, evaluate
from webhook.offline.fragments import mismatch

CASE_SUFFIXES = (".yaml", ".yml")
API_VERSION = "gpu-admission.io/v1alpha1"
KIND = "PolicyTestReport"


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    object: dict[str, Any]
    workload: str | None = None
    """The class of the object's pods, written as the policy's `podLabels.workload` label."""
    gpu_model: str | None = Field(default=None, alias="gpuModel")
    """The GPU model they ask for, written as the policy's `podLabels.gpuModel` label."""
    claims: list[dict[str, Any]] = []
    expect: Literal["allowed", "denied"]
    rules: list[str] | None = None
    patch: list[dict[str, Any]] | None = None
    pods: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class CaseResult:
    name: str
    problems: tuple[str, ...]
    """Why the case failed; empty when it passed."""
    broken: bool = False
    """The case could not be run (unreadable, not a case, an object without pods): an
    error of the case, not a verdict that differs from what it expects."""
    description: str = ""

    @property
    def passed(self) -> bool:
        return not self.problems


def case_files(directory: Path) -> list[Path]:
    """The case files under `directory`, in a stable order."""
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in CASE_SUFFIXES)


def run_cases(engine: Engine, directory: Path) -> Iterator[CaseResult]:
    for path in case_files(directory):
        yield run_case(engine, path, path.relative_to(directory).as_posix())


@dataclass(frozen=True, slots=True)
class CaseSource:
    """One case to run: its name in the report, and the file it is read from (`-`: standard
    input), or why there is none (a path that does not exist, a folder without cases)."""

    name: str
    path: str | None
    problem: str = ""


def case_sources(names: Sequence[str], run: str | None = None) -> list[CaseSource]:
    """The cases of the named files and folders, in order: a folder stands for the case
    files under it (named by their path in it), a file or `-` for itself. `run`, a regular
    expression, keeps the cases whose name it matches (searched, as `go test -run`); a
    path without cases is kept as a case that cannot be run, whatever `run` says."""
    pattern = re.compile(run) if run is not None else None
    sources: list[CaseSource] = []
    for name in names:
        path = Path(name)
        if name == STDIN or path.is_file():
            found = [CaseSource(name, name)]
        elif path.is_dir():
            files = case_files(path)
            if not files:
                suffixes = ", ".join(f"*{suffix}" for suffix in CASE_SUFFIXES)
                sources.append(CaseSource(name, None, f"no test cases ({suffixes}) in this folder"))
                continue
            found = [CaseSource(f.relative_to(path).as_posix(), str(f)) for f in files]
        else:
            sources.append(CaseSource(name, None, "no such file or folder"))
            continue
        sources += [s for s in found if pattern is None or pattern.search(s.name)]
    return sources


def run_case_source(engine: Engine, source: CaseSource, stdin: TextIO) -> CaseResult:
    if source.path is None:
        return CaseResult(source.name, (source.problem,), broken=True)
    if source.path == STDIN:
        return run_case_text(engine, stdin.read(), STDIN, source.name)
    return run_case(engine, Path(source.path), source.name)


def run_case(engine: Engine, path: Path, name: str) -> CaseResult:
    try:
        text = path.read_text("utf-8")
    except UnicodeDecodeError as error:
        return CaseResult(name, (f"cannot read: not UTF-8 text ({error.reason})",), broken=True)
    except OSError as error:
        return CaseResult(name, (f"cannot read: {error.strerror or error}",), broken=True)
    return run_case_text(engine, text, str(path), name)


def run_case_text(engine: Engine, text: str, source: str, name: str) -> CaseResult:
    """Run the case of `text`, read from `source` and named `name` in the report."""
    try:
        case = read_case(text, source)
    except ManifestError as error:
        return CaseResult(name, (f"invalid case: {error}",), broken=True)
    description = case.description.strip()
    for index, claim in enumerate(case.claims):
        if not is_claim_object(claim) or unread_version(claim) is not None:
            versions = ", ".join(VERSIONS)
            reason = f"claims[{index}]: not a ResourceClaimTemplate or ResourceClaim of {versions}"
            return CaseResult(name, (reason,), broken=True, description=description)
    fields = case_labels(engine.policy, case.workload, case.gpu_model)
    try:
        obj = labelled(case.object, fields, engine.policy, engine.kinds, text, source)
    except ManifestError as error:
        return CaseResult(name, (f"invalid case: {error}",), broken=True, description=description)
    given = ClaimDocuments.of([obj, *case.claims])
    report = evaluate(engine, [Document(source, 1, obj)], claims=given)
    if report.skipped:
        reason = f"object: {report.skipped[0].reason}"
        return CaseResult(name, (reason,), broken=True, description=description)
    problems = tuple(case_problems(case, report.pods, report.claim_objects))
    return CaseResult(name, problems, description=description)


def cases_data(results: Sequence[CaseResult], policy: str) -> dict[str, Any]:
    """The report of `policy test --output json|yaml` (a PolicyTestReport; its JSON Schema
    ships in webhook/offline/schemas/): every case with `result` pass, fail (differs from
    what it expects) or error (cannot be run), and why."""
    failed = sum(1 for r in results if r.problems and not r.broken)
    errors = sum(1 for r in results if r.broken)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "policy": policy,
        "passed": failed == errors == 0,
        "summary": {
            "cases": len(results),
            "passed": len(results) - failed - errors,
            "failed": failed,
            "errors": errors,
        },
        "cases": [
            {
                "name": r.name,
                "description": r.description,
                "result": "error" if r.broken else "fail" if r.problems else "pass",
                "problems": list(r.problems),
            }
            for r in results
        ],
    }


def read_case(text: str, source: str) -> Case:
    """The case of `text`; raises ManifestError at the line of what is wrong with it."""
    data = read_yaml(text, source)
    try:
        case = Case.model_validate(data)
    except ValidationError as error:
        # A misspelt key first: it explains the missing one that usually comes with it.
        first = min(error.errors(), key=lambda e: e["type"] != "extra_forbidden")
        line, reason = case_problem(first, Case, text)
        raise ManifestError(source, line, reason) from error
    unknown = unknown_rules(case.rules or (), RULES.names, text)
    if unknown is not None:
        raise ManifestError(source, *unknown)
    return case


def case_problems(
    case: Case,
    pods: Sequence[PodEvaluation],
    claim_objects: Sequence[ClaimObjectEvaluation] = (),
) -> list[str]:
    """Every way the evaluated pods (or the claim object) differ from what the case expects."""
    problems = []
    judged: list[PodEvaluation | ClaimObjectEvaluation] = [*pods, *claim_objects]
    verdict = "allowed" if all(j.allowed for j in judged) else "denied"
    failed = list(dict.fromkeys(rule for j in judged for rule in j.failed_rules))
    if verdict != case.expect:
        messages = [j.message for j in judged if j.message]
        problems.append(
            f"expected {case.expect}, got {verdict}"
            + (f" ({'; '.join(messages)})" if messages else "")
        )
    if case.rules is not None and set(case.rules) != set(failed):
        problems.append(f"expected rules to fail: {_names(case.rules)}; failed: {_names(failed)}")
    for operation in case.patch or ():
        if not any(operation in p.patch for p in pods):
            problems.append(f"patch operation {json.dumps(operation)} is not in the mutation")
    for index, fragment in enumerate(case.pods or ()):
        differences = [mismatch(fragment, p.mutated) for p in pods]
        if all(d is not None for d in differences):
            problems.append(f"pods[{index}] is not in a mutated pod: {differences[0]}")
    return problems


def _names(rules: Sequence[str]) -> str:
    return ", ".join(rules) if rules else "none"
