"""Memory given back to the system: the allocator's thresholds pinned, the heap trimmed."""

from __future__ import annotations

import asyncio
import platform

import pytest

from webhook.http import memory

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")


@glibc
def test_on_glibc_the_allocator_thresholds_are_pinned() -> None:
    assert memory.keep_large_blocks_mapped() is True


def test_the_heap_is_trimmed_every_interval_until_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(memory, "give_back", lambda: trims.append(1))

    async def run() -> None:
        task = asyncio.create_task(memory.trim_periodically(0.01))
        while len(trims) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(run(), 30))

    assert len(trims) >= 3
