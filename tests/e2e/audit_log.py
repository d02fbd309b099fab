"""kube-apiserver's own audit log, for the session's control plane: pod creations at the
Metadata level, which holds the audit annotations admission webhooks return (recorded
under each webhook's name: `mutate.gpu-admission.io/injected`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create]
    resources: [{group: "", resources: [pods]}]
  - level: None
"""


def audit_flags(directory: Path) -> tuple[str, ...]:
    """kube-apiserver's flags writing its audit log of pod creations into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(POLICY, "utf-8")
    return (
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log_path(directory)}",
        "--audit-log-format=json",
        "--audit-log-maxsize=100",
    )


def log_path(directory: Path) -> Path:
    return directory / "audit.log"


def events(directory: Path) -> Iterator[dict[str, Any]]:
    """The events kube-apiserver has written so far, oldest first."""
    path = log_path(directory)
    if not path.is_file():
        return
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            yield json.loads(line)
