"""Run the admission service over HTTPS with uvicorn."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from webhook.certs import ensure_dev_serving_certificate
from webhook.engine import Engine
from webhook.http.app import Readiness, create_app
from webhook.policy import Policy

log = logging.getLogger("gpu_admission.serve")


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8443
    tls_cert: Path | None = None
    tls_key: Path | None = None
    log_level: str = "info"


def cache_directory() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-admission"


def serving_certificate(settings: ServeSettings) -> tuple[Path, Path]:
    """The certificate to serve: the one given, or a generated dev certificate for localhost."""
    if settings.tls_cert and settings.tls_key:
        return settings.tls_cert, settings.tls_key
    directory = cache_directory() / "dev-certs"
    paths = ensure_dev_serving_certificate(directory)
    log.warning(
        "no --tls-cert/--tls-key given: serving a self-signed development certificate",
        extra={"certificate": str(paths.cert), "ca": str(paths.ca_cert)},
    )
    return paths.cert, paths.key


def serve(policy: Policy, settings: ServeSettings) -> None:
    engine = Engine(policy)
    readiness = Readiness(checks={"policy": lambda: (True, policy.source)})
    app = create_app(lambda: engine, readiness)
    cert, key = serving_certificate(settings)
    log.info(
        "serving",
        extra={"url": f"https://{settings.host}:{settings.port}", "policy": policy.source},
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        ssl_certfile=str(cert),
        ssl_keyfile=str(key),
        log_config=None,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=5,
    )
