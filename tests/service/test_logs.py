"""webhook/service/logs.py: one JSON object per line, and no line that says the wrong
scheme."""

from __future__ import annotations

import logging

from webhook.service.logs import UvicornAddressFilter


def record(logger: str, message: str) -> logging.LogRecord:
    return logging.LogRecord(logger, logging.INFO, "", 0, message, (), None)


def test_uvicorns_plain_http_address_line_is_dropped() -> None:
    """uvicorn serves behind the TLS gate and would say http:// of an HTTPS service."""
    running = record("uvicorn.error", "Uvicorn running on %s://%s:%d (Press CTRL+C to quit)")

    assert not UvicornAddressFilter().filter(running)


def test_every_other_line_is_kept() -> None:
    kept = [
        record("uvicorn.error", "Application startup complete."),
        record("gpu_admission.serve", "Uvicorn running on nothing of ours"),
    ]

    assert all(UvicornAddressFilter().filter(r) for r in kept)
