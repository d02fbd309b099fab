"""Publishing PolicyReports (``wgpolicyk8s.io/v1alpha2``): one per namespace, kept as given.

Several replicas may publish the same audit: each report is written with the wing's
conflict strategy (``webhook.kube.writes``: read, then create or replace on top of the
version read, again on 409), and a report whose results are those already stored
but for their timestamps is not written at all, so replicas that agree write once
between them. A report of ours in a namespace no longer audited is deleted.

Ours are the reports named ``gpu-admission`` (the only name written) with the
``app.kubernetes.io/managed-by`` label; both are asked of kube-apiserver (field and
label selectors), so labelled reports of other names, which any tenant may create in
its namespace, are never listed, parsed or deleted. The list is paged and parsed as it
arrives, one report at a time (``webhook.kube.listing.list_objects``), and of each
report read only a digest of what ``same_report`` compares is kept: a tenant who may
write a report named ours in its namespace can make it as large as etcd allows, and
one too large to parse (``MAX_OBJECT_SIZE``) is taken for a report that differs, so
ours replaces it. A cluster without
the PolicyReport CRD answers 404 to the first list; ``publish`` then returns None and
writes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from kubernetes import client

from webhook.kube.api_errors import NOT_FOUND, ApiException, api_error_message
from webhook.kube.listing import MAX_OBJECT_SIZE, TooLarge, list_objects
from webhook.kube.writes import retry_on_conflict

__all__ = ["GROUP", "PLURAL", "VERSION", "PublishResult", "publish_policy_reports"]

log = logging.getLogger("gpu_admission.audit")

GROUP = "wgpolicyk8s.io"
VERSION = "v1alpha2"
PLURAL = "policyreports"
MANAGED_BY = "app.kubernetes.io/managed-by=gpu-admission"
REPORT_NAME = "gpu-admission"
"""The name of every report the service writes, one per namespace."""
OURS = f"metadata.name={REPORT_NAME}"
PAGE_SIZE = 100
"""Reports per page: each may hold hundreds of results."""
TIMEOUT = (10.0, 30.0)
TOO_LARGE_DIGEST = "too large to be read"
"""The digest of a stored report too large to parse: equal to no report's."""


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
        stored = _stored_digests(objects, selector)
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    result = PublishResult()
    for namespace, report in reports.items():
        if stored.get(namespace) == report_digest(report):
            result.unchanged.append(namespace)
            continue
        try:
            _write(objects, namespace, report)
        except ApiException as error:
            result.failed[namespace] = api_error_message(error)
            continue
        result.written.append(namespace)
    for namespace in sorted(set(stored) - set(reports)):
        try:
            objects.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, REPORT_NAME, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status != NOT_FOUND:
                result.failed[namespace] = api_error_message(error)
                continue
        result.deleted.append(namespace)
    return result


def _stored_digests(objects: Any, selector: str) -> dict[str, str]:
    """Namespace -> the digest of our report there, listed a page at a time."""
    digests: dict[str, str] = {}
    for item in _our_reports(objects, selector):
        if isinstance(item, TooLarge):
            if item.name == REPORT_NAME and item.namespace:
                digests[item.namespace] = TOO_LARGE_DIGEST
            continue
        metadata = item.get("metadata") or {}
        namespace = metadata.get("namespace")
        if metadata.get("name") == REPORT_NAME and isinstance(namespace, str):
            digests[namespace] = report_digest(item)
    return digests


def _our_reports(objects: Any, selector: str) -> Iterator[dict[str, Any] | TooLarge]:
    listing = functools.partial(
        objects.list_cluster_custom_object,
        GROUP,
        VERSION,
        PLURAL,
        label_selector=selector,
        field_selector=OURS,
    )
    return list_objects(listing, max_object_size=MAX_OBJECT_SIZE, limit=PAGE_SIZE)


def report_digest(report: Mapping[str, Any]) -> str:
    """A digest of what `same_report` compares: equal digests, the same report."""
    metadata = report.get("metadata") or {}
    compared = {
        "summary": report.get("summary"),
        "labels": metadata.get("labels"),
        "annotations": metadata.get("annotations"),
        "results": _timeless(report.get("results")),
    }
    text = orjson.dumps(compared, option=orjson.OPT_SORT_KEYS, default=repr)
    return hashlib.sha256(text).hexdigest()


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
