"""Giving memory back to the system after large bodies (glibc's allocator only).

glibc serves a large allocation from its own mapping and unmaps it when freed, but it
raises that threshold to the size of the largest block freed so far: after one 7 MiB
body, every buffer under 7 MiB comes from the heap, and the heap, fragmented by many
connections' buffers, keeps its peak. That is how 40 stalled uploads left the server at
365 MiB after they were gone. So the threshold is pinned at glibc's own default (which
also stops it moving), and the heap is trimmed every few seconds
(``trim_periodically``), in a thread: the allocator's lock is taken, not the GIL, and a
trim of a fragmented heap takes milliseconds the event loop does not spend. Connections
come and go by the thousand under attack and leave the heap fragmented too.

Elsewhere (musl, macOS) both are no-ops.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024
"""glibc's default; setting it explicitly turns off its dynamic raise."""
TRIM_THRESHOLD = 1024 * 1024
"""Free memory at the top of the heap kept for reuse rather than returned."""


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not all(hasattr(libc, f) for f in ("mallopt", "malloc_trim", "gnu_get_libc_version")):
        return None
    return libc


def keep_large_blocks_mapped() -> bool:
    """Pin the allocator's thresholds (once, at start); whether it could be done."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def give_back() -> None:
    """Return the free pages of the heap to the system (a few milliseconds at most)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


TRIM_INTERVAL = 10.0


async def trim_periodically(interval: float = TRIM_INTERVAL) -> None:
    """Give free heap pages back every ``interval`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        await asyncio.to_thread(give_back)
