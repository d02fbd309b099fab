"""Where the audit lists a kind: nowhere, across the cluster, or namespace by namespace.

Listing a kind in each opted-in namespace costs at least one request per namespace,
even where a namespace holds none of it: in a cluster of 500 opted-in namespaces, six
workload kinds that nobody uses cost 3,000 requests. One request for a page of one
object, across the cluster, tells how many the cluster holds (``count_kind``). Then:

- none anywhere: the kind is not listed at all;
- few enough that listing them across the cluster takes no more pages than the
  namespaces would take requests: one listing across the cluster, its objects outside
  the namespaces audited passed over (the audit judges only those in scope);
- otherwise, or when kube-apiserver does not say how many, or the credentials may not
  list the kind across the cluster: namespace by namespace, as before.

So no kind costs more requests than it did listed per namespace, plus the one that
counts it; objects of other namespaces read across the cluster are at most a page for
each namespace audited, each parsed one at a time under the listing's cap.
"""

from __future__ import annotations

import logging
from typing import Any

from webhook.engine.templates import TemplateKind
from webhook.kube.api_errors import ApiException, api_error_message
from webhook.kube.listing import AUDIT_PAGE_SIZE, count_kind

__all__ = ["listed_where", "where_to_list"]

log = logging.getLogger("gpu_admission.audit")

Where = tuple[str, ...] | None
"""The namespaces to list a kind in one by one (none at all when empty), or None: across
the cluster."""


def where_to_list(api: Any, kind: TemplateKind, version: str, namespaces: tuple[str, ...]) -> Where:
    """Where to list ``kind`` for an audit of ``namespaces``, after one request that counts
    its objects across the cluster; ``namespaces`` when it cannot be counted."""
    try:
        count = count_kind(api, kind, version)
    except ApiException as error:
        log.info(
            "audit: a kind could not be counted across the cluster; listed per namespace",
            extra={"kind": kind.kind, "reason": api_error_message(error)},
        )
        return namespaces
    return listed_where(count, namespaces)


def listed_where(
    count: int | None, namespaces: tuple[str, ...], page_size: int = AUDIT_PAGE_SIZE
) -> Where:
    """Where to list a kind of which the cluster holds ``count`` objects (None: unknown)
    for an audit of ``namespaces``, in pages of ``page_size``."""
    if count is None:
        return namespaces
    if count == 0:
        return ()
    pages_across = -(-count // page_size)
    return None if pages_across <= len(namespaces) else namespaces
