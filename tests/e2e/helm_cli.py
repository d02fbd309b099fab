"""The real helm, run as a platform team runs it against one of the e2e clusters."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def run_helm(
    helm_binary: Path,
    kubeconfig: Path,
    home: Path,
    namespace: str,
    *args: str,
    check: bool = True,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """`helm ARGS --namespace NAMESPACE` with a kubeconfig and a Helm home of the test's
    own (cache, config and data: nothing of the machine's); with `check`, a failure
    raises AssertionError with helm's own words."""
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run(
        [str(helm_binary), *args, "--namespace", namespace],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stderr}")
    return result
