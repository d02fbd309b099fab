"""Command lines of the four control-plane components, the way envtest starts them.

Only the flags a test cluster needs: everything else keeps the upstream
default, so the cluster behaves like a real one (same admission plugins, same
scheduler profile, same controllers except those that need a kubelet).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from .pki import ControlPlanePki

# Services get cluster IPs from here; nothing routes to them (there is no
# kube-proxy), the range only has to be valid.
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

# node-lifecycle would mark every node NotReady and evict its pods, because no
# kubelet ever sends a heartbeat; node-ipam needs a cluster CIDR for pods that
# nothing here would use. Every other default controller runs, among them
# deployment, replicaset, job, cronjob, disruption, garbage-collector,
# namespace, serviceaccount and serviceaccount-token.
CONTROLLERS = "*,-node-lifecycle-controller,-node-ipam-controller"


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    apiserver: int
    scheduler: int
    controller_manager: int


def etcd_command(binary: Path, data_dir: Path, ports: Ports) -> list[str]:
    client_url = f"http://127.0.0.1:{ports.etcd_client}"
    return [
        str(binary),
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        # A single member never talks to peers; port 0 keeps it off a fixed port.
        "--listen-peer-urls=http://localhost:0",
        # Test data is thrown away: skipping fsync makes writes (and so every
        # apiserver request) much faster on a busy two-core machine.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def apiserver_command(
    binary: Path,
    pki: ControlPlanePki,
    ports: Ports,
    cert_dir: Path,
    admission_config: Path | None = None,
    *,
    address: str = "127.0.0.1",
    service_cidr: str = SERVICE_CLUSTER_IP_RANGE,
) -> list[str]:
    """``address``: where it listens and what it advertises (loopback unless a real
    node's pods must reach it, through the ``kubernetes`` Service's endpoints)."""
    # An AdmissionConfiguration configures built-in admission plugins (e.g. ResourceQuota's
    # limitedResources); without one every plugin keeps its upstream default.
    admission = [f"--admission-control-config-file={admission_config}"] if admission_config else []
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={pki.apiserver.cert}",
        f"--tls-private-key-file={pki.apiserver.key}",
        f"--secure-port={ports.apiserver}",
        f"--bind-address={address}",
        # Without it the apiserver looks for the default route's address and a
        # machine without one fails with "Unable to find suitable network address".
        f"--advertise-address={address}",
        f"--service-cluster-ip-range={service_cidr}",
        "--allow-privileged=true",
        "--authorization-mode=RBAC",
        f"--client-ca-file={pki.ca.cert}",
        # The scheduler and controller-manager read this CA from the
        # extension-apiserver-authentication ConfigMap and log an error every
        # few seconds while it is missing; kubeadm sets the same flags.
        f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.service_account_public_key}",
        f"--service-account-signing-key-file={pki.service_account_private_key}",
        # On loopback the "kubernetes" Service's endpoints would point at 127.0.0.1,
        # which Endpoints validation rejects ("may not be in the loopback range"),
        # and no pod runs to use them anyway; a real node's pods do.
        f"--endpoint-reconciler-type={'none' if address == '127.0.0.1' else 'lease'}",
        *admission,
    ]


def write_scheduler_config(path: Path, kubeconfig: Path) -> Path:
    # With --config the scheduler ignores --kubeconfig: the connection must be
    # in the file. No leader election: there is one scheduler, and waiting for
    # a lease would only delay the first binding.
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def scheduler_command(
    binary: Path, config: Path, kubeconfig: Path, ports: Ports, cert_dir: Path
) -> list[str]:
    return [
        str(binary),
        f"--config={config}",
        # Its own secure port serves /healthz; authn/authz kubeconfigs let it
        # check callers against the apiserver instead of warning at start-up.
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--secure-port={ports.scheduler}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
    ]


def controller_manager_command(
    binary: Path, pki: ControlPlanePki, kubeconfig: Path, ports: Ports, cert_dir: Path
) -> list[str]:
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--secure-port={ports.controller_manager}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
        "--leader-elect=false",
        f"--controllers={CONTROLLERS}",
        # Each controller acts as its own service account, as in a real
        # cluster, so RBAC denials show up here the way they would there.
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.service_account_private_key}",
        # Published into every namespace as the kube-root-ca.crt ConfigMap.
        f"--root-ca-file={pki.ca.cert}",
        f"--cluster-signing-cert-file={pki.ca.cert}",
        f"--cluster-signing-key-file={pki.ca.key}",
    ]
