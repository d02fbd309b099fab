"""A second kube-apiserver on the control plane's etcd, started with flags of its own.

Two apiservers on one etcd are one cluster, as in a highly available control plane:
whatever one stores the other serves, and the shared controller-manager and scheduler
act on it. Only the admission chain differs, so a request sent through this one meets
an apiserver configured differently, and nothing changes for every other test. It
costs one apiserver start (about 4 s), not a control plane.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .cluster import Cluster
from .components import Ports, apiserver_command
from .controlplane import START_TIMEOUT, ControlPlane
from .kubeconfig import write_kubeconfig
from .ports import free_ports
from .probes import http_ok
from .processes import Component

__all__ = ["second_apiserver"]


@contextmanager
def second_apiserver(
    controlplane: ControlPlane, work_dir: Path, admission_config: Path
) -> Iterator[Cluster]:
    """kubectl as admin through a kube-apiserver reading ``admission_config``."""
    [port] = free_ports(1)
    ports = Ports(controlplane.ports.etcd_client, port, 0, 0)
    pki = controlplane.pki  # the same CA, client CA and service-account keys
    component = Component(
        "kube-apiserver-2",
        apiserver_command(
            controlplane.bin_dir / "kube-apiserver",
            pki,
            ports,
            work_dir / "apiserver-certs",
            admission_config=admission_config,
        ),
        work_dir / "logs" / "kube-apiserver-2.log",
    )
    url = f"https://127.0.0.1:{port}"
    component.start()
    try:
        component.wait_healthy(
            http_ok(f"{url}/readyz", controlplane.admin_ssl_context()), START_TIMEOUT
        )
        kubeconfig = write_kubeconfig(
            work_dir / "admin.kubeconfig",
            server=url,
            ca_cert=pki.ca.cert,
            client=pki.admin,
            user="admin",
        )
        yield Cluster(controlplane.kubectl_binary, kubeconfig, work_dir / "kubectl-cache")
    finally:
        component.stop()
