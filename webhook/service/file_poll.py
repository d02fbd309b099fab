"""Notice that mounted files changed, the way Kubernetes changes them, by polling.

kubelet updates a Secret or ConfigMap volume by writing a new hidden directory and
atomically swapping the ``..data`` symlink to it; the files a server opened by name
are never written, so inotify on them stays silent. A ``FilePoller`` therefore reads
the files every few seconds and compares a hash of their contents with the last one
seen. The certificate reloader and the policy reloader both use it:

- ``look`` (in a worker thread) returns the new contents once per distinct change,
  and reports an unreadable file once, not on every poll while it stays unreadable;
- ``run`` polls forever on the running event loop: a ``prepare`` step checks the new
  contents in a worker thread, an ``install`` step puts them in use on the loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = ["DEFAULT_INTERVAL", "FilePoller", "content_digest"]

log = logging.getLogger("gpu_admission.poll")

#: Seconds between two looks at the files. A mounted volume lags its Secret or ConfigMap
#: by up to a minute anyway; five seconds more keeps the cost of polling negligible.
DEFAULT_INTERVAL = 5.0

Prepared = TypeVar("Prepared")


def content_digest(*parts: bytes) -> str:
    """A hash of several files' contents that tells ``ab`` + ``c`` from ``a`` + ``bc``."""
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(len(part).to_bytes(8, "big"))
        hashed.update(part)
    return hashed.hexdigest()


class FilePoller:
    """Reads ``paths`` and tells when their contents differ from the last ones seen."""

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        interval: float = DEFAULT_INTERVAL,
        on_unreadable: Callable[[OSError], None],
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the reload interval must be positive, got {interval}")
        self.paths = tuple(paths)
        self.interval = interval
        self._on_unreadable = on_unreadable
        self._seen = ""

    def read(self) -> tuple[bytes, ...]:
        """The contents of every file, now (OSError if one is missing or unreadable)."""
        return tuple(path.read_bytes() for path in self.paths)

    def seen(self, contents: Sequence[bytes]) -> None:
        """Remember ``contents`` as in use, so ``look`` reports only a later change."""
        self._seen = content_digest(*contents)

    def forget(self) -> None:
        """Report the current contents again on the next ``look``, to try them again."""
        self._seen = ""

    def look(self) -> tuple[bytes, ...] | None:
        """The contents if they changed since the last look, else None."""
        try:
            contents = self.read()
        except OSError as error:
            # Report a missing file once, not on every poll while it stays missing.
            marker = f"unreadable: {error.strerror or error}"
            if self._seen != marker:
                self._seen = marker
                self._on_unreadable(error)
            return None
        digest = content_digest(*contents)
        if digest == self._seen:
            return None
        self._seen = digest
        return contents

    async def run(
        self,
        prepare: Callable[[], Prepared | None],
        install: Callable[[Prepared], object],
        *,
        idle: Callable[[], object] = lambda: None,
        what: str,
    ) -> None:
        """Every ``interval`` seconds: ``prepare`` in a worker thread, then ``install`` what
        it returned on the loop, or ``idle`` when it returned None; until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                prepared = await asyncio.to_thread(prepare)
                if prepared is not None:
                    install(prepared)
                else:
                    idle()
            except Exception:  # the watcher must outlive any one bad poll
                log.exception(f"checking {what} failed")
