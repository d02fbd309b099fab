"""The oracles, each built unless built already and started once per test session.

`make test` builds them before pytest starts (``python -m tests.e2e.build_controlplane
--before-tests``); run alone, these tests build them here. Without Go they are skipped,
unless GPU_ADMISSION_E2E=required says that this run must exercise Go's builds (CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.differential.matching import MatchingOracle
from tests.differential.oracle import PlacementOracle
from tests.differential.toolkit import ToolkitOracle
from tests.e2e.build_controlplane import (
    MATCHING_ORACLE,
    ORACLE,
    TOOLKIT_ORACLE,
    Binary,
    BuildFailed,
    GoToolchainMissing,
    ensure_oracle,
)


def built(oracle: Binary) -> Path:
    """The oracle's binary; the test skipped without Go (failed when Go is required)."""
    try:
        return ensure_oracle(oracle)
    except GoToolchainMissing as error:
        if os.environ.get("GPU_ADMISSION_E2E", "").strip().lower() == "required":
            pytest.fail(f"GPU_ADMISSION_E2E=required but {error}", pytrace=False)
        pytest.skip(str(error))
    except BuildFailed as error:
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def oracle() -> Iterator[PlacementOracle]:
    with PlacementOracle(built(ORACLE)) as placement_oracle:
        yield placement_oracle


@pytest.fixture(scope="session")
def matching_oracle() -> Iterator[MatchingOracle]:
    with MatchingOracle(built(MATCHING_ORACLE)) as matching:
        yield matching


@pytest.fixture(scope="session")
def toolkit_oracle() -> Iterator[ToolkitOracle]:
    with ToolkitOracle(built(TOOLKIT_ORACLE)) as toolkit:
        yield toolkit
