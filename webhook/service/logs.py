"""Structured logs: one JSON object per line, with the fields a log search needs."""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's ANSI-coloured copy of the message
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode("utf-8")


class UvicornAddressFilter(logging.Filter):
    """Drops uvicorn's "Uvicorn running on http://..." line: uvicorn is given no TLS (the
    service's TLS gate does it), so it names the scheme wrong; the service's own
    ``serving`` line gives the address with ``https://``."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.name.startswith("uvicorn") and str(record.msg).startswith("Uvicorn running on")
        )


def configure_logging(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(UvicornAddressFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
