"""Fixtures of the install tests: the kubectl the end-to-end harness builds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.build_controlplane import GoToolchainMissing, bin_dir, ensure_binaries


@pytest.fixture(scope="module")
def kubectl() -> Path:
    """The kubectl the e2e harness builds; built here only when e2e is required."""
    binary = bin_dir() / "kubectl"
    if binary.is_file():
        return binary
    if os.environ.get("GPU_ADMISSION_E2E", "").strip().lower() != "required":
        pytest.skip(f"no kubectl at {binary}; `python -m tests.e2e.build_controlplane` builds it")
    try:
        return ensure_binaries() / "kubectl"
    except GoToolchainMissing as error:
        pytest.fail(f"GPU_ADMISSION_E2E=required but {error}", pytrace=False)
