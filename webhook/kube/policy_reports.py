"""Publishing PolicyReports (``wgpolicyk8s.io/v1alpha2``): one per namespace, kept as given.

Several replicas may publish the same audit: each report is written with the wing's
conflict strategy (``webhook.kube.writes``: read, then create or replace on top of the
version read, again on 409), and a report whose results are those already stored
but for their timestamps is not written at all, so replicas that agree write once
between them. A report of ours (the ``app.kubernetes.io/managed-by`` label) in a
namespace no longer audited is deleted. A cluster without the PolicyReport CRD
answers 404 to the first list; ``publish`` then returns None and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from webhook.kube.api_errors import NOT_FOUND, ApiException, api_error_message
from webhook.kube.writes import retry_on_conflict

__all__ = ["GROUP", "PLURAL", "VERSION", "PublishResult", "publish_policy_reports"]

log = logging.getLogger("gpu_admission.audit")

GROUP = "wgpolicyk8s.io"
VERSION = "v1alpha2"
PLURAL = "policyreports"
MANAGED_BY = "app.kubernetes.io/managed-by=gpu-admission"
TIMEOUT = (10.0, 30.0)


@dataclass
class PublishResult:
    written: list[str] = field(default_factory=list)
    """Namespaces whose report was created or replaced."""
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """Namespace -> why its report could not be written (a namespace being deleted, say)."""


def publish_policy_reports(
    api: Any, reports: Mapping[str, dict[str, Any]], *, selector: str = MANAGED_BY
) -> PublishResult | None:
    """Make each namespace's report (`reports`: namespace -> PolicyReport) what is stored,
    and delete our reports (those matching `selector`) of the namespaces not in `reports`.
    None when the cluster does not serve PolicyReports."""
    objects: Any = client.CustomObjectsApi(api)
    try:
        stored = objects.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, label_selector=selector, _request_timeout=TIMEOUT
        )
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    ours: dict[tuple[str, str], dict[str, Any]] = {}
    for item in stored.get("items") or ():
        metadata = item.get("metadata") or {}
        ours[(metadata.get("namespace", ""), metadata.get("name", ""))] = item
    result = PublishResult()
    for namespace, report in reports.items():
        name = report["metadata"]["name"]
        current = ours.get((namespace, name))
        if current is not None and same_report(current, report):
            result.unchanged.append(namespace)
            continue
        try:
            _write(objects, namespace, report)
        except ApiException as error:
            result.failed[namespace] = api_error_message(error)
            continue
        result.written.append(namespace)
    names = {(namespace, report["metadata"]["name"]) for namespace, report in reports.items()}
    for namespace, name in sorted(set(ours) - names):
        try:
            objects.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status != NOT_FOUND:
                result.failed[namespace] = api_error_message(error)
                continue
        result.deleted.append(namespace)
    return result


def same_report(stored: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether `stored` says what `wanted` says: summary, results but for their timestamps,
    labels and annotations."""
    for key in ("summary",):
        if stored.get(key) != wanted.get(key):
            return False
    for key in ("labels", "annotations"):
        if (stored.get("metadata") or {}).get(key) != wanted["metadata"].get(key):
            return False
    return _timeless(stored.get("results")) == _timeless(wanted.get("results"))


def _timeless(results: Any) -> list[Any]:
    if not isinstance(results, list):
        return []
    return [
        {k: v for k, v in r.items() if k != "timestamp"} if isinstance(r, dict) else r
        for r in results
    ]


def _write(objects: Any, namespace: str, report: dict[str, Any]) -> None:
    name = report["metadata"]["name"]

    def write() -> None:
        try:
            current = objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status != NOT_FOUND:
                raise
            objects.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, report, _request_timeout=TIMEOUT
            )
            return
        version = current["metadata"]["resourceVersion"]
        body = dict(report, metadata=dict(report["metadata"], resourceVersion=version))
        objects.replace_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name, body, _request_timeout=TIMEOUT
        )

    retry_on_conflict(write)
