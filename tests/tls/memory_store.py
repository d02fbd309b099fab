"""A ``CertificateStore`` in memory: the Secrets and caBundles of one namespace."""

from __future__ import annotations

from collections.abc import Mapping

from cryptography import x509

from webhook.tls.pki import certificates_from_pem, decode_ca_bundle

NAMESPACE = "gpu-admission"
MUTATING = "MutatingWebhookConfiguration/gpu-admission/mutate.gpu-admission.io"
VALIDATING = "ValidatingWebhookConfiguration/gpu-admission/validate.gpu-admission.io"


class MemoryStore:
    """The Secrets and caBundles of one namespace, recording the order of the writes."""

    def __init__(self) -> None:
        self.secrets: dict[str, tuple[dict[str, bytes], str]] = {}
        self.bundles: dict[str, str] = {}
        self.writes: list[str] = []
        self.fail_bundle_writes = False

    def where(self, secret: str) -> str:
        return f"{NAMESPACE}/{secret}"

    def read_secret(self, name: str) -> dict[str, bytes] | None:
        return dict(self.secrets[name][0]) if name in self.secrets else None

    def write_secret(self, name: str, data: Mapping[str, bytes], secret_type: str) -> None:
        self.secrets[name] = (dict(data), secret_type)
        self.writes.append(f"secret {name}")

    def read_ca_bundles(self) -> dict[str, str]:
        return dict(self.bundles)

    def write_ca_bundles(self, bundles: Mapping[str, str]) -> None:
        if self.fail_bundle_writes:
            raise RuntimeError("the API server went away")
        self.bundles.update(bundles)
        self.writes.append("caBundles")

    # what the tests look at

    def leaf(self) -> x509.Certificate:
        return certificates_from_pem(self.secrets["tls"][0]["tls.crt"])[0]

    def ca(self) -> x509.Certificate:
        return certificates_from_pem(self.secrets["tls-ca"][0]["ca.crt"])[0]

    def trusted(self, key: str = MUTATING) -> list[x509.Certificate]:
        return decode_ca_bundle(self.bundles[key])
