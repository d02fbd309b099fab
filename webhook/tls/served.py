"""The serving certificate the service presents right now, and how long it has left.

An expired serving certificate makes kube-apiserver fail every call, and with a
fail-closed webhook that refuses every pod in scope. So expiry is something the
service states, not something an operator has to remember: ``CertificateState`` holds
the certificate the TLS context currently serves (the reloader replaces it), gives its
``not_after`` and ``seconds_left()`` ready for a metric, answers a ``/readyz`` check,
and says when it is time to warn.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass

from cryptography import x509

__all__ = ["EXPIRY_WARNING", "CertificateState", "ServedCertificate", "warn_if_expiring"]

#: Under this much validity left, the service logs a warning at start, on each reload and
#: once when a loaded certificate crosses it.
EXPIRY_WARNING = dt.timedelta(days=30)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class ServedCertificate:
    """What is worth knowing about one serving certificate, without its key."""

    serial_number: int
    subject: str
    issuer: str
    not_before: dt.datetime
    not_after: dt.datetime

    @classmethod
    def of(cls, certificate: x509.Certificate) -> ServedCertificate:
        return cls(
            serial_number=certificate.serial_number,
            subject=certificate.subject.rfc4514_string(),
            issuer=certificate.issuer.rfc4514_string(),
            not_before=certificate.not_valid_before_utc,
            not_after=certificate.not_valid_after_utc,
        )

    def seconds_left(self, now: dt.datetime | None = None) -> float:
        return (self.not_after - (now or _now())).total_seconds()


class CertificateState:
    """The certificate served to new connections; safe to read from any thread.

    Readers see either the previous or the new certificate: ``replace`` swaps one
    reference under a lock, and ``current`` returns the snapshot.
    """

    def __init__(self, certificate: ServedCertificate) -> None:
        self._lock = threading.Lock()
        self._current = certificate

    @property
    def current(self) -> ServedCertificate:
        with self._lock:
            return self._current

    def replace(self, certificate: ServedCertificate) -> None:
        with self._lock:
            self._current = certificate

    @property
    def not_after(self) -> dt.datetime:
        """When the served certificate expires (timezone-aware UTC)."""
        return self.current.not_after

    def seconds_left(self, now: dt.datetime | None = None) -> float:
        """Seconds until the served certificate expires; negative once it has."""
        return self.current.seconds_left(now)

    def expiring_soon(self, now: dt.datetime | None = None) -> bool:
        return self.seconds_left(now) < EXPIRY_WARNING.total_seconds()

    def readiness(self) -> tuple[bool, str]:
        """A ``/readyz`` check: ready while the served certificate is valid.

        An expired certificate fails every call from kube-apiserver, so such a replica is
        of no use behind the Service; one that expires soon is still ready, with a warning
        in the detail.
        """
        served = self.current
        left = served.seconds_left()
        expires = served.not_after.isoformat()
        if left <= 0:
            return False, f"serial {served.serial_number:x} expired at {expires}"
        detail = f"serial {served.serial_number:x} expires at {expires} ({_days(left)} left)"
        if left < EXPIRY_WARNING.total_seconds():
            detail += "; renew it"
        return True, detail


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:.1f} days" if days < 10 else f"{days:.0f} days"


def warn_if_expiring(log: logging.Logger, state: CertificateState) -> bool:
    """Log a warning when the served certificate has under ``EXPIRY_WARNING`` left.

    Returns whether it warned, so a caller can warn once per certificate.
    """
    if not state.expiring_soon():
        return False
    served = state.current
    log.warning(
        "the serving certificate expires soon: renew it (gpu-admission certs rotate)",
        extra={
            "serial": f"{served.serial_number:x}",
            "not_after": served.not_after.isoformat(),
            "seconds_left": round(served.seconds_left()),
        },
    )
    return True
