"""A directory laid out and updated the way kubelet projects a Secret volume.

kubelet (its AtomicWriter) writes every version of the Secret into a new hidden
directory ``..<timestamp>``, points the symlink ``..data`` at it by creating
``..data_tmp`` and renaming it over ``..data``, and exposes each key as a symlink
``<key> -> ..data/<key>``. A server that opened ``<key>`` by name sees the new content
on its next read, but the file it names is never written, so inotify on it stays
silent: exactly what the certificate reloader must cope with.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

_versions = itertools.count()


class SecretVolume:
    def __init__(self, directory: Path, files: Mapping[str, bytes]) -> None:
        self.directory = directory
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.update(files)

    def path(self, key: str) -> Path:
        return self.directory / key

    def update(self, files: Mapping[str, bytes]) -> None:
        """Swap in a new version holding ``files``, atomically, as kubelet does."""
        stamp = f"..{dt.datetime.now(dt.UTC):%Y_%m_%d_%H_%M_%S}.{next(_versions)}"
        version = self.directory / stamp
        version.mkdir(mode=0o700)
        for key, content in files.items():
            descriptor = os.open(version / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with open(descriptor, "wb") as file:
                file.write(content)
        data = self.directory / "..data"
        previous = os.readlink(data) if data.is_symlink() else None
        temporary = self.directory / "..data_tmp"
        temporary.symlink_to(stamp)
        os.rename(temporary, data)
        for key in files:
            if not self.path(key).is_symlink():
                self.path(key).symlink_to(f"..data/{key}")
        if previous is not None:
            shutil.rmtree(self.directory / previous)
