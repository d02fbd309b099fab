"""A Go module's source, as its release published it, from Go's module cache: the real
manifests of the components beside us (Kueue's CRDs and webhooks, the Prometheus
Operator's CRDs) are read there, never written down by us."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from .build_controlplane import GoToolchainMissing

# Seconds `go mod download` may take: it fetches the release if no build did.
DOWNLOAD_TIMEOUT = 300.0


def module_source(module: str, cwd: Path | None = None) -> Path:
    """The source tree of `module` (`path@version`, or a path `cwd`'s go.mod pins), in
    Go's module cache: downloaded through the module proxy if it is not there yet. A
    `path@version` is downloaded from this folder, in no Go module of anyone's (whose go
    line could ask for another toolchain)."""
    go = shutil.which("go")
    if go is None:
        raise GoToolchainMissing(
            f"the 'go' command is not on PATH; {module} is read from its module's source"
        )
    result = subprocess.run(
        [go, "mod", "download", "-json", module],
        cwd=cwd or Path(__file__).resolve().parent,
        capture_output=True,
        text=True,
        timeout=DOWNLOAD_TIMEOUT,
        env={**os.environ, "GOTOOLCHAIN": "local"},
        check=False,
    )
    # On failure Go still prints the JSON document, with the reason under "Error".
    info: dict[str, str] = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or result.stderr
        raise RuntimeError(f"go mod download {module} failed: {reason}")
    return Path(info["Dir"])
