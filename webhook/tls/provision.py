"""The certificates of an install: created when the cluster has none, renewed after that.

``gpu-admission install`` must leave the cluster with a CA Secret, a serving Secret
whose leaf covers the Service, and webhook configurations that trust the CA, whether
it runs for the first time or again over an earlier install. ``provision`` creates
both Secrets when neither exists and otherwise hands over to ``rotate``, which renews
the leaf when it is due and keeps every ``caBundle`` trusting the CA. A serving Secret
without its CA Secret is refused: a new CA would silently distrust the leaf the pods
serve. ``installed_ca_bundle`` is the ``caBundle`` install then writes.
"""

from __future__ import annotations

import datetime as dt

from webhook.tls.pki import ca_bundle, decode_ca_bundle, issue_service_certificate
from webhook.tls.rotation import (
    CertificateStore,
    RotationError,
    RotationReport,
    RotationRequest,
    rotate,
    store_new_ca,
)
from webhook.tls.secret_layout import TLS_SECRET_TYPE, ca_from_secret, serving_secret_data

__all__ = ["installed_ca_bundle", "provision"]


def provision(
    store: CertificateStore, request: RotationRequest, *, now: dt.datetime | None = None
) -> RotationReport:
    """Create the CA and serving Secrets of ``request`` when neither exists (the leaf
    for ``request.service``); otherwise ``rotate``."""
    ca_secret = store.read_secret(request.ca_secret)
    serving = store.read_secret(request.secret)
    if ca_secret is None and serving is not None:
        raise RotationError(
            f"{store.where(request.secret)} exists but its CA Secret "
            f"{store.where(request.ca_secret)} does not; restore it, or delete the serving "
            "Secret to start afresh"
        )
    if ca_secret is not None:
        return rotate(store, request, now=now)
    if request.service is None:
        raise ValueError("a first serving certificate needs the Service it is for")
    ca = store_new_ca(store, request, now or dt.datetime.now(dt.UTC))
    leaf = issue_service_certificate(ca, request.service, request.namespace, days=request.days)
    store.write_secret(request.secret, serving_secret_data(leaf, ca), TLS_SECRET_TYPE)
    return RotationReport(
        lines=[f"created a CA and a serving certificate in {store.where(request.secret)}"],
        renewed=True,
        ca_rotated=True,
    )


def installed_ca_bundle(store: CertificateStore, ca_secret: str) -> str:
    """The caBundle to install: the CA in ``ca_secret``, then every other CA the live
    bundles trust (during a rotation's overlap; install must not cut it short)."""
    data = store.read_secret(ca_secret)
    if data is None:
        raise RotationError(f"the CA Secret {store.where(ca_secret)} does not exist")
    trusted = [ca_from_secret(data).certificate]
    for bundle in store.read_ca_bundles().values():
        for certificate in decode_ca_bundle(bundle):
            if certificate not in trusted:
                trusted.append(certificate)
    return ca_bundle(*trusted)
