"""Renewing the serving certificate in a cluster, and rotating the CA behind it, safely.

The certificates live in two Secrets (``webhook.tls.secret_layout``): the serving
Secret, which the pods mount and reload (``webhook.service.certificate_reload``), and
the CA Secret, which nothing mounts. kube-apiserver trusts the CAs in each webhook's
``caBundle``. Creating both Secrets the first time is ``webhook.tls.provision``.

The order of the steps is what keeps every call working:

- A leaf renewal from the same CA changes nothing kube-apiserver trusts: the new leaf
  is written to the serving Secret and each replica picks it up when its volume does.
- A CA rotation (``rotate_ca``) first stores the new CA, then adds it to every
  ``caBundle`` next to the old one, waits for kube-apiserver to see that, and only then
  writes a leaf issued by the new CA. Replicas still serving the old leaf and replicas
  already serving the new one are both trusted during the overlap.
- Once every replica serves the new leaf, ``drop_old_ca`` leaves only the current CA
  in each ``caBundle`` (refused while the serving Secret's leaf is not from it).

Each step is safe to repeat after a failure: a leaf not issued by the current CA is
renewed, and a ``caBundle`` without the current CA gets it, before any new leaf.
Kubernetes access goes through the ``CertificateStore`` protocol (``webhook.kube.secrets``
implements it), so this module is plain logic.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.errors import GpuAdmissionError
from webhook.tls.pki import (
    CertificateAuthority,
    ca_bundle,
    certificates_from_pem,
    create_ca,
    decode_ca_bundle,
    is_issued_by,
    issue_serving_certificate,
    life_left,
    service_dns_names,
    subject_alt_names,
)
from webhook.tls.secret_layout import (
    CA_KEYS,
    CA_SECRET_TYPE,
    CERTIFICATE,
    TLS_SECRET_TYPE,
    ca_from_secret,
    ca_secret_data,
    serving_secret_data,
)

__all__ = [
    "DEFAULT_THRESHOLD",
    "CertificateStore",
    "RotationError",
    "RotationReport",
    "RotationRequest",
    "ca_common_name",
    "rotate",
    "store_new_ca",
]

#: Renew a leaf once less than this fraction of its lifetime is left: a 1-year leaf
#: about four months before it expires, which leaves room for a failed renewal or two.
DEFAULT_THRESHOLD = 1 / 3


class RotationError(GpuAdmissionError):
    """The cluster is not in a state this rotation can start from; nothing was changed
    by the step that raised it."""


class CertificateStore(Protocol):
    """The Secrets of one namespace and the ``caBundle`` of each webhook of one
    configuration name, keyed as ``<Kind>/<configuration>/<webhook>``."""

    def where(self, secret: str) -> str:
        """How to name ``secret`` in messages, e.g. ``namespace/name``."""
        ...

    def read_secret(self, name: str) -> dict[str, bytes] | None: ...

    def write_secret(self, name: str, data: Mapping[str, bytes], secret_type: str) -> None:
        """Create the Secret, or replace the data of the existing one."""
        ...

    def read_ca_bundles(self) -> dict[str, str]: ...

    def write_ca_bundles(self, bundles: Mapping[str, str]) -> None: ...


@dataclass(frozen=True)
class RotationRequest:
    namespace: str
    secret: str
    ca_secret: str
    service: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    force: bool = False
    rotate_ca: bool = False
    drop_old_ca: bool = False
    days: int = 365
    ca_days: int = 3650
    #: Seconds between adding a CA to the caBundles and writing a leaf it issued, for
    #: every kube-apiserver to see the new bundle first (it watches the configurations).
    propagation_delay: float = 5.0

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1:
            raise ValueError(f"threshold must be between 0 and 1, got {self.threshold}")
        if self.rotate_ca and self.drop_old_ca:
            raise ValueError(
                "rotate the CA and drop the old one in two runs: the old CA must stay "
                "trusted until every replica serves a leaf from the new one"
            )
        if self.days < 1 or self.ca_days <= self.days:
            raise ValueError(
                f"need 1 <= days < ca_days (a CA outlives its leaves), got days={self.days}, "
                f"ca_days={self.ca_days}"
            )
        if self.propagation_delay < 0:
            raise ValueError("propagation_delay must not be negative")
        if self.service is not None:
            service_dns_names(self.service, self.namespace)  # refuse bad names before any write


@dataclass
class RotationReport:
    """What a rotation did, one line per step, for the command to print."""

    lines: list[str] = field(default_factory=list)
    renewed: bool = False
    ca_rotated: bool = False
    changed_bundles: list[str] = field(default_factory=list)


def ca_common_name(now: dt.datetime) -> str:
    """Each CA gets a name of its own, so that while two are trusted side by side no
    client confuses one with the other when it looks an issuer up by name."""
    return f"gpu-admission CA {now:%Y-%m-%dT%H:%M:%SZ}"


def rotate(
    store: CertificateStore,
    request: RotationRequest,
    *,
    now: dt.datetime | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RotationReport:
    """Bring the Secrets and caBundles to the state ``request`` asks for (see the module
    docstring for the order of the steps)."""
    moment = now or dt.datetime.now(dt.UTC)
    report = RotationReport()
    serving = _read_required(store, request.secret, (CERTIFICATE,), "serving")
    ca = _read_ca(store, request.ca_secret)
    leaf = _leaf(serving)
    if request.drop_old_ca and (leaf is None or not is_issued_by(leaf, ca.certificate)):
        raise RotationError(
            f"the leaf in {store.where(request.secret)} is not issued by the current CA yet: "
            "run `certs rotate` without --drop-old-ca first, and drop the old CA only once "
            "every replica serves the new leaf"
        )
    previous_ca = ca
    if request.rotate_ca:
        ca = store_new_ca(store, request, moment)
        report.ca_rotated = True
        report.lines.append(
            f"new CA {ca.certificate.subject.rfc4514_string()} in "
            f"{store.where(request.ca_secret)}, valid until "
            f"{ca.certificate.not_valid_after_utc:%Y-%m-%d}"
        )
    trusted = [previous_ca.certificate, ca.certificate]
    report.changed_bundles = _update_bundles(store, trusted, request.drop_old_ca, moment, report)
    reasons = _renewal_reasons(request, leaf, ca, moment)
    if reasons:
        if report.changed_bundles and request.propagation_delay:
            report.lines.append(
                f"waiting {request.propagation_delay:g}s for kube-apiserver to see the caBundle"
            )
            sleep(request.propagation_delay)
        report.lines.append("renewing the leaf: " + "; ".join(reasons))
        _renew(store, request, serving, leaf, ca, report)
    elif leaf is not None:
        report.lines.append(
            f"leaf kept: serial {leaf.serial_number:x}, {life_left(leaf, moment):.0%} of its "
            f"lifetime left (renewed under {request.threshold:.0%})"
        )
    if life_left(ca.certificate, moment) < request.threshold:
        report.lines.append(
            f"warning: the CA expires on {ca.certificate.not_valid_after_utc:%Y-%m-%d} and "
            "caps every leaf it issues: rotate it with --rotate-ca"
        )
    return report


def store_new_ca(
    store: CertificateStore, request: RotationRequest, now: dt.datetime
) -> CertificateAuthority:
    """A new CA, named for ``now`` and valid for ``request.ca_days`` days, written to the
    CA Secret before anything can depend on it."""
    ca = create_ca(ca_common_name(now), days=request.ca_days)
    store.write_secret(request.ca_secret, ca_secret_data(ca), CA_SECRET_TYPE)
    return ca


def _read_required(
    store: CertificateStore, name: str, keys: tuple[str, ...], what: str
) -> dict[str, bytes]:
    data = store.read_secret(name)
    if data is None:
        raise RotationError(
            f"the {what} Secret {store.where(name)} does not exist: create it from the "
            "files of `gpu-admission certs generate` (see `gpu-admission certs rotate --help`)"
        )
    missing = [key for key in keys if key not in data]
    if missing:
        raise RotationError(f"the {what} Secret {store.where(name)} has no {', '.join(missing)}")
    return data


def _read_ca(store: CertificateStore, name: str) -> CertificateAuthority:
    data = _read_required(store, name, CA_KEYS, "CA")
    try:
        return ca_from_secret(data)
    except (ValueError, TypeError) as error:
        raise RotationError(f"the CA in {store.where(name)} cannot be used: {error}") from None


def _leaf(serving: Mapping[str, bytes]) -> x509.Certificate | None:
    try:
        return certificates_from_pem(serving[CERTIFICATE])[0]
    except ValueError:
        return None


def _update_bundles(
    store: CertificateStore,
    trusted: list[x509.Certificate],
    drop_old: bool,
    now: dt.datetime,
    report: RotationReport,
) -> list[str]:
    """Make every caBundle trust ``trusted`` (old and current CA), keeping other CAs that
    are still valid unless ``drop_old``, in which case only the last of ``trusted``."""
    current = store.read_ca_bundles()
    if not current:
        report.lines.append("no webhook configuration found: no caBundle to update")
        return []
    wanted = {key: _bundle_for(value, trusted, drop_old, now) for key, value in current.items()}
    changed = {key: value for key, value in wanted.items() if value != current[key]}
    if changed:
        store.write_ca_bundles(changed)
    for key in current:
        count = len(decode_ca_bundle(wanted[key]))
        state = "updated" if key in changed else "unchanged"
        report.lines.append(f"caBundle of {key}: {state}, {count} CA(s)")
    return sorted(changed)


def _bundle_for(
    bundle: str, trusted: list[x509.Certificate], drop_old: bool, now: dt.datetime
) -> str:
    try:
        present = decode_ca_bundle(bundle)
    except ValueError:
        present = []  # an unreadable bundle trusts nothing; replace it
    keep = [] if drop_old else [c for c in present if c.not_valid_after_utc > now]
    add = trusted[-1:] if drop_old else trusted
    unique = {_der(certificate): certificate for certificate in [*keep, *add]}
    return ca_bundle(*unique.values())


def _der(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.DER)


def _renewal_reasons(
    request: RotationRequest,
    leaf: x509.Certificate | None,
    ca: CertificateAuthority,
    now: dt.datetime,
) -> list[str]:
    if leaf is None:
        return ["the Secret holds no readable certificate"]
    reasons = []
    if request.force:
        reasons.append("forced")
    if request.rotate_ca:
        reasons.append("the CA was rotated")
    elif not is_issued_by(leaf, ca.certificate):
        reasons.append("it was not issued by the current CA")
    if request.service:
        covered, _ = subject_alt_names(leaf)
        missing = [
            name
            for name in service_dns_names(request.service, request.namespace)
            if name not in covered
        ]
        if missing:
            reasons.append(f"it does not cover {', '.join(missing)}")
    left = life_left(leaf, now)
    if left < request.threshold:
        reasons.append(f"{left:.0%} of its lifetime left, under {request.threshold:.0%}")
    return reasons


def _renew(
    store: CertificateStore,
    request: RotationRequest,
    serving: Mapping[str, bytes],
    leaf: x509.Certificate | None,
    ca: CertificateAuthority,
    report: RotationReport,
) -> None:
    names, addresses = subject_alt_names(leaf) if leaf is not None else ([], [])
    if request.service:
        service_names = service_dns_names(request.service, request.namespace)
        names = list(dict.fromkeys([*service_names, *names]))
    if not names and not addresses:
        raise RotationError(
            f"cannot tell which names the leaf in {store.where(request.secret)} must cover: "
            "pass --service"
        )
    common_name = _common_name(leaf) or [*names, *addresses][0]
    issued = issue_serving_certificate(
        ca, common_name, dns_names=names, ip_addresses=addresses, days=request.days
    )
    # Keys of the Secret other than the three it is made of are kept.
    data = {**serving, **serving_secret_data(issued, ca)}
    store.write_secret(request.secret, data, TLS_SECRET_TYPE)
    report.renewed = True
    report.lines.append(
        f"new leaf serial {issued.certificate.serial_number:x} in {store.where(request.secret)}, "
        f"valid until {issued.certificate.not_valid_after_utc:%Y-%m-%d}, issued by "
        f"{ca.certificate.subject.rfc4514_string()}"
    )


def _common_name(certificate: x509.Certificate | None) -> str | None:
    if certificate is None:
        return None
    attributes = certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    value = attributes[0].value if attributes else None
    return value if isinstance(value, str) and value else None
