"""The Kubernetes side of certificate rotation: Secrets and webhook ``caBundle``s.

Implements ``webhook.tls.rotation.CertificateStore`` with the official client, as
``webhook.kube.client`` does for the webhook configurations themselves. Writes replace the
object read just before, with its resourceVersion, so two rotations running at once
conflict (and are retried on fresh data) instead of overwriting each other.

Objects are read as raw JSON and written back as plain dicts, so base64 values
(Secret data, ``caBundle``) pass through exactly as the API server stores them,
whatever the generated models make of ``bytes`` fields.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

__all__ = ["KubeCertificateStore"]

CONFLICT = 409
NOT_FOUND = 404
ATTEMPTS = 3

T = TypeVar("T")


def _retry_on_conflict(write: Callable[[], T]) -> T:
    for attempt in range(ATTEMPTS):
        try:
            return write()
        except ApiException as error:
            if error.status != CONFLICT or attempt == ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


class KubeCertificateStore:
    """The Secrets of ``namespace`` and the caBundles of the Mutating- and
    ValidatingWebhookConfiguration called ``configuration``."""

    def __init__(self, api: Any, namespace: str, configuration: str) -> None:
        self.namespace = namespace
        self.configuration = configuration
        # Typed as Any: bodies are plain dicts, which the client validates into its models.
        self._core: Any = client.CoreV1Api(api)
        admission = client.AdmissionregistrationV1Api(api)
        self._kinds: list[tuple[str, Callable[..., Any], Callable[..., Any]]] = [
            (
                "MutatingWebhookConfiguration",
                admission.read_mutating_webhook_configuration,
                admission.replace_mutating_webhook_configuration,
            ),
            (
                "ValidatingWebhookConfiguration",
                admission.read_validating_webhook_configuration,
                admission.replace_validating_webhook_configuration,
            ),
        ]

    def where(self, secret: str) -> str:
        return f"{self.namespace}/{secret}"

    def read_secret(self, name: str) -> dict[str, bytes] | None:
        secret = self._read_secret(name)
        if secret is None:
            return None
        data: dict[str, str] = secret.get("data") or {}
        return {key: base64.b64decode(value) for key, value in data.items()}

    def write_secret(self, name: str, data: Mapping[str, bytes], secret_type: str) -> None:
        encoded = {key: base64.b64encode(value).decode("ascii") for key, value in data.items()}

        def write() -> None:
            secret = self._read_secret(name)
            if secret is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": name,
                        "namespace": self.namespace,
                        "labels": {"app.kubernetes.io/name": "gpu-admission"},
                    },
                    "type": secret_type,
                    "data": encoded,
                }
                self._core.create_namespaced_secret(self.namespace, body)
                return
            secret["data"] = encoded
            self._core.replace_namespaced_secret(name, self.namespace, secret)

        _retry_on_conflict(write)

    def read_ca_bundles(self) -> dict[str, str]:
        bundles: dict[str, str] = {}
        for kind, read, _ in self._kinds:
            configuration = self._read_configuration(read)
            if configuration is None:
                continue
            for webhook in configuration.get("webhooks") or []:
                bundle = webhook["clientConfig"].get("caBundle", "")
                bundles[self._key(kind, webhook["name"])] = bundle
        return bundles

    def write_ca_bundles(self, bundles: Mapping[str, str]) -> None:
        for kind, read, replace in self._kinds:

            def write(
                kind: str = kind,
                read: Callable[..., Any] = read,
                replace: Callable[..., Any] = replace,
            ) -> None:
                configuration = self._read_configuration(read)
                if configuration is None:
                    return
                changed = False
                for webhook in configuration.get("webhooks") or []:
                    wanted = bundles.get(self._key(kind, webhook["name"]))
                    if wanted is not None and wanted != webhook["clientConfig"].get("caBundle"):
                        webhook["clientConfig"]["caBundle"] = wanted
                        changed = True
                if changed:
                    replace(self.configuration, configuration)

            _retry_on_conflict(write)

    def _key(self, kind: str, webhook: str) -> str:
        return f"{kind}/{self.configuration}/{webhook}"

    def _read_secret(self, name: str) -> dict[str, Any] | None:
        return _read_json(self._core.read_namespaced_secret, name, self.namespace)

    def _read_configuration(self, read: Callable[..., Any]) -> dict[str, Any] | None:
        return _read_json(read, self.configuration)


def _read_json(read: Callable[..., Any], *args: str) -> dict[str, Any] | None:
    """The object as the API server sent it, or None if it does not exist."""
    try:
        response = read(*args, _preload_content=False)
    except ApiException as error:
        if error.status == NOT_FOUND:
            return None
        raise
    document: dict[str, Any] = json.loads(response.data)
    return document
