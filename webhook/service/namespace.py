"""The namespace a `serve` replica runs in: the one its webhooks never cover.

The Helm chart and deploy/base exempt the namespace they install into from every
webhook's namespaceSelector, and the chart installs into the release's namespace,
whatever its name. A replica learns it the standard way: ``POD_NAMESPACE``, which both
Deployments set from the downward API (``fieldRef: metadata.namespace``), else the
service account's namespace file that the kubelet mounts in every pod, else the
namespace ``gpu-admission install`` and deploy/base use (a replica outside a cluster).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from webhook.install.names import NAMESPACE

__all__ = ["NAMESPACE_ENV", "SERVICE_ACCOUNT_NAMESPACE", "service_namespace"]

NAMESPACE_ENV = "POD_NAMESPACE"
"""Set by the chart's and deploy/base's Deployment from the downward API."""

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
"""The namespace of the pod's service account, mounted with its token."""


def service_namespace(
    environ: Mapping[str, str] = os.environ,
    account_file: Path = SERVICE_ACCOUNT_NAMESPACE,
) -> str:
    """The namespace this replica runs in: ``POD_NAMESPACE``, else the service account's
    namespace file, else ``gpu-admission``. An empty value, or a file that cannot be
    read, is passed over."""
    given = environ.get(NAMESPACE_ENV, "").strip()
    if given:
        return given
    try:
        mounted = account_file.read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        mounted = ""
    return mounted or NAMESPACE
