"""kube-apiserver's own /metrics, read as a PromQL expression reads them."""

from __future__ import annotations

import re

from .cluster import Cluster

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scraped(controlplane: Cluster) -> dict[str, list[tuple[dict[str, str], float]]]:
    """kube-apiserver's own /metrics: each sample's labels and value, by the name it is
    exposed under (the one a PromQL expression reads)."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for line in controlplane.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        sample = SAMPLE.match(line)
        if sample is None:
            continue  # a comment, or nothing
        labels = dict(LABEL.findall(sample["labels"] or ""))
        found.setdefault(sample["name"], []).append((labels, float(sample["value"])))
    return found
