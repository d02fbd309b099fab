"""The names of what the project installs into a cluster, and the label they all carry.

deploy/base names the same objects in its YAML; ``gpu-admission install``, the
generated files of deploy/, ``certs rotate`` and the end-to-end tests name them from
here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from webhook.engine.handlers.policy_configmap import POLICY_CONFIGMAP

__all__ = [
    "APP_LABELS",
    "CA_SECRET",
    "DEPLOYMENT",
    "IMAGE_NAME",
    "NAMESPACE",
    "POLICY_CONFIGMAP",
    "SERVICE",
    "TLS_SECRET",
    "WEBHOOK_CONFIGURATION",
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
