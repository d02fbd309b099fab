"""What publishing PolicyReports compares (webhook.kube.policy_reports); publishing itself
is proven against a real kube-apiserver in tests/e2e/test_audit_bounds.py and
tests/e2e/test_audit.py."""

from __future__ import annotations

from typing import Any

from webhook.kube import policy_reports as publishing
from webhook.kube.policy_reports import REPORT_NAME

LABELS = {"app.kubernetes.io/managed-by": "gpu-admission"}


def report(namespace: str, name: str = REPORT_NAME, passed: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": "PolicyReport",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS)},
        "summary": {"pass": passed},
        "results": [],
    }


def test_the_digest_compares_what_same_report_compares() -> None:
    stored = report("ml", passed=1)
    stored["metadata"] |= {"resourceVersion": "7", "uid": "u"}
    stored["results"] = [{"rule": "r", "timestamp": {"seconds": 1}}]
    wanted = report("ml", passed=1)
    wanted["results"] = [{"rule": "r", "timestamp": {"seconds": 2}}]

    assert publishing.same_report(stored, wanted)
    assert publishing.report_digest(stored) == publishing.report_digest(wanted)
    wanted["summary"] = {"pass": 2}
    assert publishing.report_digest(stored) != publishing.report_digest(wanted)


def test_a_stored_report_too_large_to_read_differs_from_every_report() -> None:
    """A tenant may write a report named ours as large as etcd allows: it is read one
    object at a time under the listing's cap, and one over it is replaced, not parsed."""
    assert publishing.TOO_LARGE_DIGEST not in {
        publishing.report_digest(report("ml")),
        publishing.report_digest(report("ml", passed=1)),
    }
    assert len(publishing.TOO_LARGE_DIGEST) != len(publishing.report_digest(report("ml")))
