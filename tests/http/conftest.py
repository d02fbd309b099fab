"""Fixtures of the HTTP edge's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from webhook.http.offload import ReviewWorker


@pytest.fixture(scope="module")
def worker() -> Iterator[ReviewWorker]:
    """A review worker, started before the module's first large review."""
    started = ReviewWorker()
    started.start()
    yield started
    started.stop()
