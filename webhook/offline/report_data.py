"""The report of `gpu-admission check --output json|yaml`: plain data in a stable shape.

    apiVersion: gpu-admission.io/v1alpha1
    kind: CheckReport
    policy: where the policy came from
    allowed: true when every pod and claim object is allowed
    summary: {pods: N, allowed: N, denied: N, warnings: N, skipped: N,
              claimObjects: N, claimObjectsDenied: N}   # pods, allowed and denied count
                                                        # Pods and pod templates together
    pods:                               # one per Pod and per pod template, in input order
      - source: FILE, or "-" for standard input
        line: where the object starts (1-based)
        object: {apiVersion, kind, namespace, name}
        template: JSON pointer of the pod template in the object ("" for a Pod)
        workloadClass: the workload class label's value, or null
        verdict: allowed | denied
        message: the denial as kube-apiserver would print it ("" when allowed)
        warnings: [what kubectl would print after `Warning: `, allowed or denied; first
                   each field Kubernetes does not know: `unknown field "spec.containers[0]
                   .resource" (did you mean "resources"?): kubectl's default ...`]
        rules:                          # every validation rule, in a fixed order
          - {rule: gpu-count, outcome: pass | fail | warn | audit | skip, messages: [...]}
        claims:                         # spec.resourceClaims (Dynamic Resource Allocation)
          - name: the claim's name in the pod
            source: {kind: ResourceClaimTemplate | ResourceClaim, name}, or null
            asks: [what each request asks for, e.g. "1 GPU of DeviceClass gpu.nvidia.com"]
            problem: why what it asks is not known (e.g. "was not given"), or null
        patch: [JSONPatch operations of the mutation, against receivedPod]
        diff: unified diff of receivedPod's YAML to mutatedPod's ("" without mutation)
        placement:                      # each pool and GPU model of the policy
          - {pool, model, labels: {node label: value}, reachable: yes | no | unknown,
             reasons: [why not, or why not certainly]}
        receivedPod: the pod our webhook receives (requests defaulted from limits)
        mutatedPod: the pod after the mutation, as validated
    claimObjects:                       # ResourceClaimTemplates and ResourceClaims, judged
      - {source, line, object: {...}, verdict, message, warnings,   # as at their CREATE
         asks: [each request, as for a pod's claims; empty when it cannot be read]}
    skipped:                            # objects without a pod template
      - {source, line, object: {apiVersion, kind, namespace, name}, reason}
    errors:                             # files that could not be read: nothing of them judged
      - {source, line: where the problem is, or null, reason}

`summary` also counts `errors`. With `check --only-denied`, `pods` and `claimObjects`
hold only the denied and `skipped` is empty; `summary` still counts everything.
The JSON Schema of this report ships in the package (webhook/offline/schemas/, printed
by `gpu-admission check --print-schema`).

A malformed object is a denied pod with the reason in `message` and empty
`rules`, `patch` and `placement`. A claim object of a version not read (other than
v1, v1beta2, v1beta1) is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.offline.claims_shown import pod_claim_data, requests_text
from webhook.offline.diff import mutation_diff
from webhook.offline.documents import ManifestError
from webhook.offline.evaluation import (
    ClaimObjectEvaluation,
    ObjectRef,
    PodEvaluation,
    Report,
    SkippedObject,
)

API_VERSION = "gpu-admission.io/v1alpha1"
KIND = "CheckReport"


def report_data(
    report: Report, errors: Sequence[ManifestError] = (), only_denied: bool = False
) -> dict[str, Any]:
    """The CheckReport of `report` and the files that could not be read (`errors`);
    `only_denied` lists only the denied pods and claim objects, and counts everything."""
    denied = report.denied
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "policy": report.policy,
        "allowed": report.allowed,
        "summary": {
            "pods": len(report.pods),
            "allowed": len(report.pods) - denied,
            "denied": denied,
            "warnings": report.warnings,
            "skipped": len(report.skipped),
            "claimObjects": len(report.claim_objects),
            "claimObjectsDenied": report.claim_objects_denied,
            "errors": len(errors),
        },
        "pods": [pod_data(p) for p in report.pods if not (only_denied and p.allowed)],
        "claimObjects": [
            claim_object_data(c) for c in report.claim_objects if not (only_denied and c.allowed)
        ],
        "skipped": [] if only_denied else [_skipped_data(s) for s in report.skipped],
        "errors": [
            {"source": error.source, "line": error.line, "reason": error.reason} for error in errors
        ],
    }


def pod_data(evaluation: PodEvaluation) -> dict[str, Any]:
    return {
        "source": evaluation.object.source,
        "line": evaluation.object.line,
        "object": _object_data(evaluation.object),
        "template": evaluation.template,
        "workloadClass": evaluation.workload_class,
        "verdict": "allowed" if evaluation.allowed else "denied",
        "message": evaluation.message,
        "warnings": list(evaluation.warnings),
        "rules": [
            {"rule": r.rule, "outcome": r.outcome, "messages": list(r.messages)}
            for r in evaluation.rules
        ],
        "claims": [pod_claim_data(claim) for claim in evaluation.claims],
        "patch": [dict(operation) for operation in evaluation.patch],
        "diff": mutation_diff(evaluation.received, evaluation.mutated, evaluation.describe)
        if evaluation.patch
        else "",
        "placement": [
            {
                "pool": landing.pool,
                "model": landing.model,
                "nodes": landing.shape,
                "labels": dict(landing.labels),
                "reachable": landing.reachable,
                "reasons": list(landing.reasons),
            }
            for landing in evaluation.landings
        ],
        "receivedPod": dict(evaluation.received),
        "mutatedPod": dict(evaluation.mutated),
    }


def claim_object_data(evaluation: ClaimObjectEvaluation) -> dict[str, Any]:
    return {
        "source": evaluation.object.source,
        "line": evaluation.object.line,
        "object": _object_data(evaluation.object),
        "verdict": "allowed" if evaluation.allowed else "denied",
        "message": evaluation.message,
        "warnings": list(evaluation.warnings),
        "asks": requests_text(evaluation.asks) if evaluation.asks else [],
    }


def _skipped_data(skipped: SkippedObject) -> dict[str, Any]:
    return {
        "source": skipped.object.source,
        "line": skipped.object.line,
        "object": _object_data(skipped.object),
        "reason": skipped.reason,
    }


def _object_data(ref: ObjectRef) -> dict[str, str]:
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
    }
