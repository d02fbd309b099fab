"""The names of what the project installs into a cluster, and the label they all carry.

deploy/base names the same objects in its YAML; ``gpu-admission install``, the
generated files of deploy/, ``certs rotate`` and the end-to-end tests name them from
here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from types import MappingProxyType

from webhook.engine.handlers import HANDLERS, HandlerRegistry
from webhook.engine.handlers.policy_configmap import POLICY_CONFIGMAP, validate_policy

__all__ = [
    "APP_LABELS",
    "CA_SECRET",
    "DEPLOYMENT",
    "IMAGE_NAME",
    "INSTALL_NAME",
    "INSTALL_NAME_MAX",
    "NAMESPACE",
    "POLICY_CONFIGMAP",
    "SERVICE",
    "TLS_SECRET",
    "WEBHOOK_CONFIGURATION",
    "handlers_of_install",
    "install_name",
]

NAMESPACE = "gpu-admission"
SERVICE = "gpu-admission"
DEPLOYMENT = "gpu-admission"

WEBHOOK_CONFIGURATION = "gpu-admission"
"""The name of both the Mutating- and the ValidatingWebhookConfiguration."""

TLS_SECRET = "gpu-admission-tls"
"""The kubernetes.io/tls Secret the Deployment mounts: `install` or cert-manager creates it."""
CA_SECRET = "gpu-admission-tls-ca"
"""The Secret holding the CA that `install` and `certs rotate` issue serving certificates with."""

IMAGE_NAME = "gpu-admission"
"""The image as deploy/base names it, before any override."""

APP_LABELS: Mapping[str, str] = MappingProxyType({"app.kubernetes.io/name": "gpu-admission"})
"""The label on every installed object; read-only, so each object gets a ``dict`` of it."""

INSTALL_NAME = WEBHOOK_CONFIGURATION
"""The name an install gives its objects unless told otherwise (the chart's
``fullnameOverride``): the webhook configurations', the Deployment's, and the stem of the
policy ConfigMap's (``NAME-policy``) and the Secrets' (``NAME-tls``, ``NAME-tls-ca``)."""

INSTALL_NAME_MAX = 38
"""The longest install name: its longest derived name, ``NAME-cert-rotation``, names a
CronJob, whose name is at most 52 characters (its Jobs add 11)."""

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def install_name(name: str) -> str:
    """`name` when it can name every object of an install; ValueError otherwise."""
    if not _DNS_LABEL.fullmatch(name) or len(name) > INSTALL_NAME_MAX:
        raise ValueError(
            f"{name!r} cannot name an install: it must be a DNS label of at most "
            f"{INSTALL_NAME_MAX} characters (lower-case letters, digits and '-', starting "
            "with a letter)"
        )
    return name


@functools.cache
def handlers_of_install(name: str = INSTALL_NAME) -> HandlerRegistry:
    """The webhooks of the install named `name`: ``HANDLERS``, with the policy ConfigMap's
    webhook looking for ``NAME-policy``."""
    if name == INSTALL_NAME:
        return HANDLERS
    return HANDLERS.replacing(validate_policy(f"{name}-policy"))
