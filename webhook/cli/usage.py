"""What the offline commands say when they cannot do as asked: one line on stderr and exit
status 2, as for every usage error, and the file they could not write named so."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["USAGE", "unwritable", "usage_error"]

USAGE = 2


def usage_error(message: str) -> int:
    """Print `gpu-admission: MESSAGE` on stderr; return USAGE."""
    print(f"gpu-admission: {message}", file=sys.stderr)
    return USAGE


def unwritable(path: Path, text: str) -> str | None:
    """Write `text` to `path` in UTF-8; None when written, else why it was not."""
    try:
        path.write_text(text, "utf-8")
    except OSError as error:
        return f"cannot write {path}: {error.strerror or error}"
    except UnicodeError as error:
        return f"cannot write {path}: {error}"
    return None
