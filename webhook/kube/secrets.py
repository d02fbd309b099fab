"""The Kubernetes side of certificate rotation: Secrets and webhook ``caBundle``s.

Implements ``webhook.tls.rotation.CertificateStore`` with the official client. Every
write replaces the object read just before (``webhook.kube.writes``), so two rotations
running at once conflict, and are retried on fresh data, instead of overwriting each
other. A Secret the store creates carries the labels its caller gives: which labels
mark the installed objects is the install wing's to say, not this wing's.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client

from webhook.kube.writes import read_json, retry_on_conflict

__all__ = ["KubeCertificateStore"]


class KubeCertificateStore:
    """The Secrets of ``namespace`` and the caBundles of the Mutating- and
    ValidatingWebhookConfiguration called ``configuration``; Secrets it creates get
    ``labels``."""

    def __init__(
        self, api: Any, namespace: str, configuration: str, *, labels: Mapping[str, str]
    ) -> None:
        self.namespace = namespace
        self.configuration = configuration
        self.labels = dict(labels)
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
                        "labels": dict(self.labels),
                    },
                    "type": secret_type,
                    "data": encoded,
                }
                self._core.create_namespaced_secret(self.namespace, body)
                return
            secret["data"] = encoded
            self._core.replace_namespaced_secret(name, self.namespace, secret)

        retry_on_conflict(write)

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

            retry_on_conflict(write)

    def _key(self, kind: str, webhook: str) -> str:
        return f"{kind}/{self.configuration}/{webhook}"

    def _read_secret(self, name: str) -> dict[str, Any] | None:
        return read_json(self._core.read_namespaced_secret, name, self.namespace)

    def _read_configuration(self, read: Callable[..., Any]) -> dict[str, Any] | None:
        return read_json(read, self.configuration)
