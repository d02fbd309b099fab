"""The Prometheus Operator's own CRDs, from its release's source (``module_source``), so
that the chart's ServiceMonitor and PrometheusRule are judged by the schema the operator
installs, through kube-apiserver, not by our reading of it."""

from __future__ import annotations

from typing import Any

import yaml

from .module_source import module_source

MODULE = "github.com/prometheus-operator/prometheus-operator"
VERSION = "v0.94.0"
"""A release the module proxy serves; its CRDs define monitoring.coreos.com/v1."""
CRD_FOLDER = "example/prometheus-operator-crd"


def crds(*plurals: str) -> list[dict[str, Any]]:
    """The release's CustomResourceDefinitions of `plurals` (`servicemonitors`, ...)."""
    folder = module_source(f"{MODULE}@{VERSION}") / CRD_FOLDER
    found = []
    for plural in plurals:
        path = folder / f"monitoring.coreos.com_{plural}.yaml"
        found.append(yaml.safe_load(path.read_text("utf-8")))
    return found
