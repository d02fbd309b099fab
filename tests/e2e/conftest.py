"""pytest wiring: one control plane (and one GPU fleet) per test session.

The binaries are built on first use and cached (see build_controlplane.py).
Without Go the e2e tests are skipped, unless GPU_ADMISSION_E2E=required says
that this run must exercise them (CI), in which case they fail.
GPU_ADMISSION_E2E=off skips them without building anything.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Fixtures of the tests of gpu-admission itself, re-exported so pytest finds them.
from .admission_fixtures import admission, opted_in, plain_namespace
from .audit_log import audit_flags
from .build_controlplane import GoToolchainMissing, ensure_binaries
from .controlplane import ControlPlane
from .nodes import NodeSpec, register_fleet

E2E_MODE = os.environ.get("GPU_ADMISSION_E2E", "").strip().lower()
HERE = Path(__file__).resolve().parent

__all__ = ["admission", "controlplane", "gpu_fleet", "opted_in", "plain_namespace"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Every test in this directory is an e2e test, whether or not its module
    # remembered to say so, so that `-m "not e2e"` reliably leaves them out.
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def controlplane_bin_dir() -> Path:
    if E2E_MODE == "off":
        pytest.skip("e2e tests switched off (GPU_ADMISSION_E2E=off)")
    try:
        return ensure_binaries()
    except GoToolchainMissing as error:
        if E2E_MODE == "required":
            pytest.fail(f"GPU_ADMISSION_E2E=required but {error}", pytrace=False)
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def controlplane(
    controlplane_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A running control plane, shared by every e2e test of the session.

    Tests share it, so each works in a namespace of its own (create_namespace)
    and cleans up cluster-scoped objects it creates.
    """
    # pytest keeps the last few tmp directories: the logs of a failed run stay.
    work_dir = tmp_path_factory.mktemp("controlplane")
    plane = ControlPlane(
        controlplane_bin_dir, work_dir, extra_apiserver_flags=audit_flags(work_dir / "audit")
    )
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def gpu_fleet(controlplane: ControlPlane) -> list[NodeSpec]:
    """The GPU and CPU nodes of nodes.FLEET, registered once per session."""
    return register_fleet(controlplane)
