"""Health probes: one HTTP GET that answers True only on a 200 "ok"."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Callable


def insecure_tls() -> ssl.SSLContext:
    """TLS without verification, for the scheduler's and controller-manager's
    health ports: they serve a self-signed certificate they make themselves."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def http_ok(url: str, context: ssl.SSLContext | None = None) -> Callable[[], bool]:
    """A probe that GETs ``url`` and succeeds on status 200 with body ``ok``.

    Connection errors and non-200 answers (a /readyz still waiting for its
    post-start hooks answers 500) mean "not yet", never an exception.
    """

    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                body: bytes = response.read()
                # etcd answers {"health":"true",...}; the Kubernetes components "ok".
                return response.status == 200 and (body == b"ok" or b'"health":"true"' in body)
        except (OSError, urllib.error.URLError):
            return False

    return probe
