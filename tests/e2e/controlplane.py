"""A real Kubernetes control plane on 127.0.0.1: etcd, kube-apiserver,
kube-scheduler and kube-controller-manager, without kubelets.

Started in order, each only once the one before answers its health check;
stopped in reverse order. Everything (certificates, kubeconfigs, etcd data,
logs) lives in one work directory, so a failed run can be read afterwards.
"""

from __future__ import annotations

import shutil
import ssl
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from .cluster import Cluster
from .components import (
    SERVICE_CLUSTER_IP_RANGE,
    Ports,
    apiserver_command,
    controller_manager_command,
    etcd_command,
    scheduler_command,
    write_scheduler_config,
)
from .kubeconfig import write_kubeconfig
from .pki import ControlPlanePki, create_pki
from .ports import free_ports
from .probes import http_ok, insecure_tls
from .processes import Component, ComponentFailed

# A cold kube-apiserver on two busy cores needs 10-20 s before /readyz; the
# margin is for CI machines that are building or testing something else too.
START_TIMEOUT = 120.0

__all__ = ["ComponentFailed", "ControlPlane"]


def _without_flags(command: list[str], replacing: tuple[str, ...]) -> list[str]:
    """`command` less the flags `replacing` sets again: list flags such as
    ``--authorization-mode`` add up rather than the last one winning."""
    names = {flag.split("=", 1)[0] for flag in replacing}
    return [part for part in command if part.split("=", 1)[0] not in names]


def _kubelet_client_flags(pki: ControlPlanePki) -> list[str]:
    """How kube-apiserver authenticates to a real node's kubelet, when there is one."""
    client = pki.apiserver_kubelet_client
    if client is None:
        return []
    return [f"--kubelet-client-certificate={client.cert}", f"--kubelet-client-key={client.key}"]


class ControlPlane(Cluster):
    """The control plane and, through :class:`Cluster`, kubectl as its admin."""

    def __init__(
        self,
        bin_dir: Path,
        work_dir: Path | None = None,
        *,
        controllers: bool = True,
        extra_apiserver_flags: tuple[str, ...] = (),
        extra_controller_manager_flags: tuple[str, ...] = (),
        apiserver_address: str = "127.0.0.1",
        service_cidr: str = SERVICE_CLUSTER_IP_RANGE,
        kubernetes_service_ip: str = "10.0.0.1",
        node_name: str | None = None,
    ) -> None:
        """``controllers=False`` starts etcd and kube-apiserver only (a benchmark of
        writes wants no scheduler or controller-manager watching what it writes);
        ``extra_apiserver_flags`` are appended to kube-apiserver's command. A real
        node's cluster gives kube-apiserver an address its pods reach, a Service
        range of the node's and credentials for that node's kubelet and kube-proxy."""
        self.bin_dir = bin_dir
        self.controllers = controllers
        self.extra_apiserver_flags = extra_apiserver_flags
        self.extra_controller_manager_flags = extra_controller_manager_flags
        self.apiserver_address = apiserver_address
        self.service_cidr = service_cidr
        self.kubernetes_service_ip = kubernetes_service_ip
        self.node_name = node_name
        # A directory we made ourselves is ours to remove on stop; one handed
        # in (pytest's tmp_path) is left for the caller and its retention rules.
        self._owns_work_dir = work_dir is None
        self.work_dir = work_dir or Path(tempfile.mkdtemp(prefix="gpu-admission-e2e-"))
        etcd_port, apiserver_port, scheduler_port, cm_port = free_ports(4)
        self.ports = Ports(etcd_port, apiserver_port, scheduler_port, cm_port)
        self.api_url = f"https://{apiserver_address}:{apiserver_port}"
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        super().__init__(
            kubectl_binary=bin_dir / "kubectl",
            kubeconfig=self.work_dir / "admin.kubeconfig",
            cache_dir=self.work_dir / "kubectl-cache",
        )
        self._pki: ControlPlanePki | None = None
        self._components: list[Component] = []
        self.startup_seconds: dict[str, float] = {}

    # -- credentials for a Python client -----------------------------------

    @property
    def pki(self) -> ControlPlanePki:
        if self._pki is None:
            raise RuntimeError("the control plane has not been started")
        return self._pki

    @property
    def ca_path(self) -> Path:
        """The CA that signed the apiserver's serving certificate."""
        return self.pki.ca.cert

    @property
    def admin_cert_path(self) -> Path:
        return self.pki.admin.cert

    @property
    def admin_key_path(self) -> Path:
        return self.pki.admin.key

    def admin_ssl_context(self) -> ssl.SSLContext:
        """TLS settings for a Python client acting as cluster admin, e.g.
        ``httpx.Client(base_url=cp.api_url, verify=cp.admin_ssl_context())``."""
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.load_cert_chain(self.admin_cert_path, self.admin_key_path)
        return context

    @property
    def log_dir(self) -> Path:
        return self.work_dir / "logs"

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> ControlPlane:
        started = time.monotonic()
        try:
            self._start_all()
        except BaseException:
            # Keep the directory even if we made it: the full logs are there.
            self._owns_work_dir = False
            self.stop()
            raise
        self.startup_seconds["total"] = time.monotonic() - started
        return self

    def _start_all(self) -> None:
        pki_dir = self.work_dir / "pki"
        pki_dir.mkdir(parents=True, exist_ok=True)
        apiserver_ips = tuple(dict.fromkeys(("127.0.0.1", self.apiserver_address)))
        pki = self._pki = create_pki(
            pki_dir,
            apiserver_ips=(*apiserver_ips, self.kubernetes_service_ip),
            node_name=self.node_name,
        )
        ports = self.ports

        self._launch(
            "etcd",
            etcd_command(self.bin_dir / "etcd", self.work_dir / "etcd-data", ports),
            http_ok(f"{self.etcd_url}/health"),
        )

        write_kubeconfig(
            self.kubeconfig,
            server=self.api_url,
            ca_cert=pki.ca.cert,
            client=pki.admin,
            user="admin",
        )
        # /readyz, not /healthz: ready means the post-start hooks are done, among
        # them the bootstrap RBAC roles that the scheduler and controller-manager
        # need the moment they connect.
        self._launch(
            "kube-apiserver",
            [
                *_without_flags(
                    apiserver_command(
                        self.bin_dir / "kube-apiserver",
                        pki,
                        ports,
                        self.work_dir / "apiserver-certs",
                        address=self.apiserver_address,
                        service_cidr=self.service_cidr,
                    ),
                    self.extra_apiserver_flags,
                ),
                *self.extra_apiserver_flags,
                *_kubelet_client_flags(pki),
            ],
            http_ok(f"{self.api_url}/readyz", self.admin_ssl_context()),
        )
        if not self.controllers:
            return

        scheduler_kubeconfig = write_kubeconfig(
            self.work_dir / "kube-scheduler.kubeconfig",
            server=self.api_url,
            ca_cert=pki.ca.cert,
            client=pki.scheduler,
            user="system:kube-scheduler",
        )
        scheduler_config = write_scheduler_config(
            self.work_dir / "kube-scheduler.yaml", scheduler_kubeconfig
        )
        self._launch(
            "kube-scheduler",
            scheduler_command(
                self.bin_dir / "kube-scheduler",
                scheduler_config,
                scheduler_kubeconfig,
                ports,
                self.work_dir / "scheduler-certs",
            ),
            http_ok(f"https://127.0.0.1:{ports.scheduler}/healthz", insecure_tls()),
        )

        cm_kubeconfig = write_kubeconfig(
            self.work_dir / "kube-controller-manager.kubeconfig",
            server=self.api_url,
            ca_cert=pki.ca.cert,
            client=pki.controller_manager,
            user="system:kube-controller-manager",
        )
        self._launch(
            "kube-controller-manager",
            [
                *_without_flags(
                    controller_manager_command(
                        self.bin_dir / "kube-controller-manager",
                        pki,
                        cm_kubeconfig,
                        ports,
                        self.work_dir / "controller-manager-certs",
                    ),
                    self.extra_controller_manager_flags,
                ),
                *self.extra_controller_manager_flags,
            ],
            http_ok(f"https://127.0.0.1:{ports.controller_manager}/healthz", insecure_tls()),
        )

    def _launch(
        self,
        name: str,
        command: list[str],
        probe: Callable[[], bool],
        *,
        network_namespace: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        component = Component(
            name,
            command,
            self.log_dir / f"{name}.log",
            network_namespace=network_namespace,
            env=env,
        )
        component.start()
        self._components.append(component)
        seconds = component.wait_healthy(probe, START_TIMEOUT)
        self.startup_seconds[name] = seconds
        print(f"[controlplane] {name} healthy after {seconds:.1f}s", file=sys.stderr)

    def pid_of(self, name: str) -> int:
        """The process id of a running component (``"kube-apiserver"``, ``"etcd"``, ...)."""
        for component in self._components:
            if component.name == name and component.pid is not None:
                return component.pid
        raise KeyError(name)

    def check_running(self) -> None:
        """Raise ComponentFailed (with its log) if any component has died."""
        for component in self._components:
            component.check_running()

    def stop(self) -> None:
        """Stop every component, last started first; safe to call twice."""
        while self._components:
            self._components.pop().stop()
        if self._owns_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
