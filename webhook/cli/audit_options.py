"""`serve --audit-interval`: how often the service audits what runs (service.audit_schedule).

Light on imports: `serve --help` reads it.
"""

from __future__ import annotations

import argparse
import re

__all__ = ["DEFAULT_IN_CLUSTER_INTERVAL", "add_audit_interval_option", "audit_interval"]

DEFAULT_IN_CLUSTER_INTERVAL = 3600.0
"""Once an hour inside a cluster unless told otherwise: a pod's standing changes with the
policy and the nodes, both slow, and a run lists every pod."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h)?$")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def add_audit_interval_option(serve: argparse.ArgumentParser) -> None:
    serve.add_argument(
        "--audit-interval",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="audit the pods and workloads running every DURATION (600, 10m, 1h; 0: never) "
        "and publish PolicyReports and metrics (default: 1h inside a cluster, never outside)",
    )


def audit_interval(args: argparse.Namespace, in_cluster: bool) -> float | None:
    """Seconds between two audits by `serve`, or None for none."""
    given: float | None = args.audit_interval
    if given is None:
        return DEFAULT_IN_CLUSTER_INTERVAL if in_cluster else None
    return given or None


def _duration(text: str) -> float:
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (600, 10m, 1h)")
    return float(match.group(1)) * _UNIT[match.group(2)]
