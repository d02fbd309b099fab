"""Build a benchmark's Go program (standard library only) once per version of its source.

The binary goes to the cache the test harness uses, outside the repository, named by a
digest of the program's .go and .mod files; a build is written under a temporary name
and renamed, so a concurrent or interrupted build never leaves half a binary.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from tests.e2e.build_controlplane import cache_root


def build_go_program(source: Path, name: str) -> Path:
    """The binary of the Go module in `source`, built into the cache if not there yet."""
    digest = hashlib.sha256()
    for path in sorted(source.glob("*")):
        if path.suffix in (".go", ".mod"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    target = cache_root() / "bench" / f"{name}-{digest.hexdigest()[:16]}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".tmp{os.getpid()}")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    subprocess.run(
        ["go", "build", "-trimpath", "-o", str(partial), "."], cwd=source, env=env, check=True
    )
    partial.rename(target)
    return target
