"""Certificates and keys of one control plane, issued with the project's own
``webhook.tls.pki`` so the e2e tests exercise it too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from webhook.tls.files import write_key_pair
from webhook.tls.pki import create_ca, issue_client_certificate, issue_serving_certificate


class KeyPairPaths(NamedTuple):
    cert: Path
    key: Path


@dataclass(frozen=True)
class ControlPlanePki:
    ca: KeyPairPaths
    # Trusted only for requests relayed by an authenticating front proxy (the
    # aggregation layer); it signs nothing here, see apiserver_command.
    front_proxy_ca: KeyPairPaths
    apiserver: KeyPairPaths
    admin: KeyPairPaths
    scheduler: KeyPairPaths
    controller_manager: KeyPairPaths
    # The key pair that signs and verifies service-account tokens.
    service_account_private_key: Path
    service_account_public_key: Path
    # A real node's kubelet (system:node:<name> in system:nodes, for the Node
    # authorizer) and kube-proxy (system:kube-proxy, bound by bootstrap RBAC).
    kubelet: KeyPairPaths | None = None
    kube_proxy: KeyPairPaths | None = None
    # kube-apiserver's own client certificate towards kubelets (logs, exec), as
    # kubeadm issues it.
    apiserver_kubelet_client: KeyPairPaths | None = None


def _write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    # RSA, as kubeadm generates for sa.key: every token verifier accepts RS256.
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_path = directory / "service-account.key"
    public_path = directory / "service-account.pub"
    private_path.touch(mode=0o600)
    private_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_path, public_path


def create_pki(
    directory: Path,
    *,
    apiserver_ips: tuple[str, ...] = ("127.0.0.1", "10.0.0.1"),
    node_name: str | None = None,
) -> ControlPlanePki:
    """One CA that signs the apiserver's serving certificate and every client
    certificate; the apiserver trusts it as ``--client-ca-file``. ``apiserver_ips``
    are the addresses it is reached at (its own and the ``kubernetes`` Service's);
    with ``node_name`` the kubelet and kube-proxy of that real node get theirs."""
    ca = create_ca("gpu-admission-e2e-ca", days=3650)
    serving = issue_serving_certificate(
        ca,
        "kube-apiserver",
        dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
        ip_addresses=list(apiserver_ips),
        days=365,
    )
    # Kubernetes reads CN as the user and O as the groups. The scheduler and
    # controller-manager users are bound to their roles by the apiserver's
    # bootstrap RBAC policy, so no RBAC objects need creating.
    admin = issue_client_certificate(ca, "admin", organizations=["system:masters"], days=365)
    scheduler = issue_client_certificate(ca, "system:kube-scheduler", days=365)
    controller_manager = issue_client_certificate(ca, "system:kube-controller-manager", days=365)
    private_key, public_key = _write_service_account_keys(directory)
    kubelet = kube_proxy = apiserver_kubelet_client = None
    if node_name is not None:
        towards_kubelets = issue_client_certificate(
            ca, "kube-apiserver-kubelet-client", organizations=["system:masters"], days=365
        )
        apiserver_kubelet_client = KeyPairPaths(
            *write_key_pair(directory, "apiserver-kubelet-client", towards_kubelets)
        )
        kubelet_cert = issue_client_certificate(
            ca, f"system:node:{node_name}", organizations=["system:nodes"], days=365
        )
        kubelet = KeyPairPaths(*write_key_pair(directory, "kubelet", kubelet_cert))
        proxy_cert = issue_client_certificate(ca, "system:kube-proxy", days=365)
        kube_proxy = KeyPairPaths(*write_key_pair(directory, "kube-proxy", proxy_cert))
    return ControlPlanePki(
        ca=KeyPairPaths(*write_key_pair(directory, "ca", ca)),
        front_proxy_ca=KeyPairPaths(
            *write_key_pair(directory, "front-proxy-ca", create_ca("front-proxy-ca", days=3650))
        ),
        apiserver=KeyPairPaths(*write_key_pair(directory, "apiserver", serving)),
        admin=KeyPairPaths(*write_key_pair(directory, "admin", admin)),
        scheduler=KeyPairPaths(*write_key_pair(directory, "kube-scheduler", scheduler)),
        controller_manager=KeyPairPaths(
            *write_key_pair(directory, "kube-controller-manager", controller_manager)
        ),
        service_account_private_key=private_key,
        service_account_public_key=public_key,
        kubelet=kubelet,
        kube_proxy=kube_proxy,
        apiserver_kubelet_client=apiserver_kubelet_client,
    )
