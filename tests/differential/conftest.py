"""The placement oracle, built unless built already and started once per test session.

`make test` builds it before pytest starts (``python -m tests.e2e.build_controlplane
--before-tests``); run alone, these tests build it here. Without Go they are skipped,
unless GPU_ADMISSION_E2E=required says that this run must exercise Go's builds (CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.differential.oracle import PlacementOracle
from tests.e2e.build_controlplane import BuildFailed, GoToolchainMissing, ensure_oracle


@pytest.fixture(scope="session")
def oracle() -> Iterator[PlacementOracle]:
    try:
        binary = ensure_oracle()
    except GoToolchainMissing as error:
        if os.environ.get("GPU_ADMISSION_E2E", "").strip().lower() == "required":
            pytest.fail(f"GPU_ADMISSION_E2E=required but {error}", pytrace=False)
        pytest.skip(str(error))
    except BuildFailed as error:
        pytest.fail(str(error), pytrace=False)
    with PlacementOracle(binary) as placement_oracle:
        yield placement_oracle
