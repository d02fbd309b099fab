"""`gpu-admission policy test`: a folder of cases, each an object and what must become of it.

A case is one YAML file:

    description: why the case exists (optional)
    object: a Pod, or a workload with pod templates (Deployment, Job, ...), or a
            ResourceClaimTemplate or ResourceClaim (judged as at its CREATE)
    claims:                       # optional: the ResourceClaimTemplates and ResourceClaims
      - {apiVersion: resource.k8s.io/v1, kind: ResourceClaimTemplate, ...}  # its pods name
    expect: allowed | denied      # denied when any of its pods is denied
    rules: [gpu-count]            # optional: exactly the rules that must fail
    patch:                        # optional: operations the mutation must contain
      - {op: add, path: /spec/priorityClassName, value: inference-priority}
    pods:                         # optional: fragments some mutated pod must contain
      - spec: {priority: 1000000}

A claim of Dynamic Resource Allocation naming an object not among `claims` (nor the
object itself) is not judged, as in `check`. `claims` are not judged themselves: a
case of its own judges one. Patch paths are relative to the pod (the mutation applies
to pods, also those made from a template). Fragments match as in webhook.offline.fragments:
mappings by their keys, lists by items found anywhere in the list.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from webhook.engine import Engine
from webhook.offline.claim_documents import (
    VERSIONS,
    ClaimDocuments,
    is_claim_object,
    unread_version,
)
from webhook.offline.documents import Document, ManifestError, read_yaml
from webhook.offline.evaluation import ClaimObjectEvaluation, PodEvaluation, evaluate
from webhook.offline.fragments import mismatch
from webhook.policy.load import format_location

CASE_SUFFIXES = (".yaml", ".yml")


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    object: dict[str, Any]
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


def run_case(engine: Engine, path: Path, name: str) -> CaseResult:
    try:
        case = read_case(path.read_text("utf-8"), str(path))
    except (OSError, UnicodeDecodeError) as error:
        return CaseResult(name, (f"cannot read: {error}",), broken=True)
    except ManifestError as error:
        return CaseResult(name, (f"invalid case: {error}",), broken=True)
    description = case.description.strip()
    for index, claim in enumerate(case.claims):
        if not is_claim_object(claim) or unread_version(claim) is not None:
            versions = ", ".join(VERSIONS)
            reason = f"claims[{index}]: not a ResourceClaimTemplate or ResourceClaim of {versions}"
            return CaseResult(name, (reason,), broken=True, description=description)
    given = ClaimDocuments.of([case.object, *case.claims])
    report = evaluate(engine, [Document(str(path), 1, case.object)], claims=given)
    if report.skipped:
        reason = f"object: {report.skipped[0].reason}"
        return CaseResult(name, (reason,), broken=True, description=description)
    problems = tuple(case_problems(case, report.pods, report.claim_objects))
    return CaseResult(name, problems, description=description)


def read_case(text: str, source: str) -> Case:
    data = read_yaml(text, source)
    try:
        return Case.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = format_location(first["loc"])
        reason = f"{where}: {first['msg']}" if where else first["msg"]
        raise ManifestError(source, None, reason) from error


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
