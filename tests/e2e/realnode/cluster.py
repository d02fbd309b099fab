"""A control plane with one real node: containerd, runc, CNI, kubelet and kube-proxy.

kube-apiserver, etcd, kube-scheduler and kube-controller-manager run as in every
e2e cluster, kube-apiserver on the machine's end of the node's veth pair instead
of loopback so that the node's pods reach it through the ``kubernetes``
Service. containerd, kubelet and kube-proxy run in the node's network namespace
(:mod:`.network`), so every pod, every Service address and kube-proxy's rules
live there: kube-apiserver calls a webhook's Service the way it does in any
cluster, through the ClusterIP kube-proxy translates.

The node is the CPU node the service runs on; it registers itself as kubelet
does, with the labels kubelet gives any node. Stopping kills whatever ran in
the node's cgroups, unmounts what kubelet and containerd mounted under the work
directory, removes the cgroups and then the namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from ..controlplane import ControlPlane
from ..kubeconfig import write_kubeconfig
from .configs import (
    NodePaths,
    cni_config,
    containerd_config,
    kube_proxy_config,
    kubelet_config,
)
from .images import build_pause_image
from .network import NetworkUnavailable, NodeNetwork

__all__ = ["NODE_NAME", "NetworkUnavailable", "RealNodeCluster", "node_prerequisites"]

NODE_NAME = "cpu-node-0"
READY_TIMEOUT = 120.0
CGROUP_HIERARCHY = Path("/sys/fs/cgroup")


def node_prerequisites() -> list[str]:
    """What this machine lacks to run the node (empty when it can)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces, mounts, cgroups)")
    for command in ("ip", "iptables", "runc", "gcc"):
        if shutil.which(command) is None and not Path(f"/usr/sbin/{command}").exists():
            missing.append(command)
    return missing


class RealNodeCluster(ControlPlane):
    """A :class:`ControlPlane` and one node of real parts, started and stopped together."""

    def __init__(self, bin_dir: Path, work_dir: Path | None = None) -> None:
        self.network = NodeNetwork.create()
        try:
            super().__init__(
                bin_dir,
                work_dir,
                extra_apiserver_flags=(
                    # The Node authorizer and NodeRestriction, as every real cluster runs
                    # them: the kubelet may touch only its node and its pods.
                    "--authorization-mode=Node,RBAC",
                    "--enable-admission-plugins=NodeRestriction",
                    # logs, exec and port-forward dial the node's address, never a
                    # name: a name would be asked of the machine's resolver.
                    "--kubelet-preferred-address-types=InternalIP",
                ),
                extra_controller_manager_flags=(
                    # node-lifecycle lifts the not-ready taint kubelet registers the node
                    # with, and so must run; the fake GPU nodes a test adds send no
                    # heartbeat, and an hour's grace keeps them Ready for the test.
                    "--controllers=*,-node-ipam-controller",
                    "--node-monitor-grace-period=1h",
                ),
                apiserver_address=self.network.host_ip,
                service_cidr=self.network.service_cidr,
                kubernetes_service_ip=self.network.kubernetes_service_ip,
                node_name=NODE_NAME,
            )
        except BaseException:
            self.network.delete()
            raise
        self.paths = NodePaths(self.work_dir / "node")
        self.cgroup_root = f"/gpu-admission-e2e-{self.network.slot}"

    def _start_all(self) -> None:
        super()._start_all()
        self._start_node()

    # -- the node ------------------------------------------------------------

    def _start_node(self) -> None:
        paths = self.paths
        for directory in (
            paths.containerd_root,
            paths.containerd_state,
            paths.cni_config_dir,
            paths.cni_state_dir,
            paths.kubelet_root,
        ):
            directory.mkdir(parents=True, exist_ok=True)
        self._create_cgroups()
        paths.containerd_config.write_text(containerd_config(paths, self.bin_dir / "cni"))
        (paths.cni_config_dir / "10-gpu-admission-e2e.conflist").write_text(
            cni_config(self.network, paths)
        )
        namespace = self.network.path
        # The shim is found on PATH, runc by its configured path.
        env = {"PATH": f"{self.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        self._launch(
            "containerd",
            [str(self.bin_dir / "containerd"), f"--config={paths.containerd_config}"],
            self._containerd_answers,
            network_namespace=namespace,
            env=env,
        )
        self.load_image(build_pause_image(paths.images))

        pki = self.pki
        assert pki.kubelet is not None and pki.kube_proxy is not None
        kubelet_kubeconfig = write_kubeconfig(
            self.work_dir / "kubelet.kubeconfig",
            server=self.api_url,
            ca_cert=pki.ca.cert,
            client=pki.kubelet,
            user=f"system:node:{NODE_NAME}",
        )
        paths.kubelet_config.write_text(
            kubelet_config(self.network, paths, pki.ca.cert, self.cgroup_root)
        )
        self._launch(
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={paths.kubelet_config}",
                f"--kubeconfig={kubelet_kubeconfig}",
                f"--root-dir={paths.kubelet_root}",
                f"--cert-dir={paths.kubelet_root / 'pki'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.network.node_ip}",
                "--v=1",
            ],
            self._node_ready,
            network_namespace=namespace,
            env=env,
        )

        proxy_kubeconfig = write_kubeconfig(
            self.work_dir / "kube-proxy.kubeconfig",
            server=self.api_url,
            ca_cert=pki.ca.cert,
            client=pki.kube_proxy,
            user="system:kube-proxy",
        )
        paths.kube_proxy_config.write_text(
            kube_proxy_config(self.network, proxy_kubeconfig, NODE_NAME)
        )
        self._launch(
            "kube-proxy",
            [str(self.bin_dir / "kube-proxy"), f"--config={paths.kube_proxy_config}"],
            self._services_programmed,
            network_namespace=namespace,
            env=env,
        )

    def _create_cgroups(self) -> None:
        """kubelet refuses a cgroupRoot that does not exist; cpuset's children start
        with no CPU or memory node, so they get their parent's."""
        for controller in CGROUP_HIERARCHY.iterdir():
            if not (controller / "cgroup.procs").exists():
                continue
            root = controller / self.cgroup_root.lstrip("/")
            root.mkdir(exist_ok=True)
            for name in ("cpuset.cpus", "cpuset.mems"):
                if (root / name).exists() and not (root / name).read_text().strip():
                    (root / name).write_text((controller / name).read_text())

    def in_node(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command in the node's network namespace (``iptables``, ``curl``...)."""
        return subprocess.run(
            ["ip", "netns", "exec", self.network.name, *command],
            capture_output=True,
            text=True,
            check=check,
        )

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """containerd's own client, in the namespace kubelet's images and pods use."""
        return subprocess.run(
            [
                str(self.bin_dir / "ctr"),
                f"--address={self.paths.containerd_socket}",
                "--namespace=k8s.io",
                *args,
            ],
            capture_output=True,
            text=True,
            check=check,
        )

    def load_image(self, archive: Path) -> None:
        """Import an OCI image archive into the node, as a registry pull would leave it."""
        self.ctr("images", "import", "--platform=linux/amd64", str(archive))

    def _containerd_answers(self) -> bool:
        if not self.paths.containerd_socket.exists():
            return False
        return self.ctr("version", check=False).returncode == 0

    def _node_ready(self) -> bool:
        result = self.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if result.returncode != 0:
            return False
        conditions = json.loads(result.stdout).get("status", {}).get("conditions", [])
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    def _services_programmed(self) -> bool:
        rules = self.in_node("iptables", "-t", "nat", "-S", "KUBE-SERVICES", check=False)
        return rules.returncode == 0 and "default/kubernetes:https" in rules.stdout

    # -- stopping ------------------------------------------------------------

    def stop(self) -> None:
        """Stop the control plane and the node, and leave nothing of the node behind:
        no process, mount, cgroup or namespace."""
        try:
            self._stop_node()
        finally:
            try:
                super().stop()
            finally:
                self.network.delete()

    def _stop_node(self) -> None:
        for name in ("kube-proxy", "kubelet"):
            for component in list(self._components):
                if component.name == name:
                    component.stop()
                    self._components.remove(component)
        self._kill_cgroup_processes()
        self._kill_shims()
        for component in list(self._components):
            if component.name == "containerd":
                component.stop()
                self._components.remove(component)
        self._unmount_under(self.work_dir)
        self._remove_cgroups()

    def _kill_cgroup_processes(self) -> None:
        for _ in range(3):
            pids = [pid for pid in _all_pids() if self._in_node_cgroup(pid)]
            if not pids:
                return
            for pid in pids:
                _kill(pid)
            time.sleep(0.5)

    def _in_node_cgroup(self, pid: int) -> bool:
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return False
        return any(line.split(":", 2)[-1].startswith(self.cgroup_root + "/") for line in lines)

    def _kill_shims(self) -> None:
        socket = str(self.paths.containerd_socket)
        for pid in _all_pids():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (
                command
                and command[0].endswith(b"containerd-shim-runc-v2")
                and any(socket.encode() in part for part in command)
            ):
                _kill(pid)

    @staticmethod
    def _unmount_under(directory: Path) -> None:
        prefix = str(directory.resolve())
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point == prefix or point.startswith(prefix + "/"):
                mounts.append(point)
        for point in sorted(set(mounts), key=len, reverse=True):
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)

    def _remove_cgroups(self) -> None:
        for controller in CGROUP_HIERARCHY.iterdir():
            root = controller / self.cgroup_root.lstrip("/")
            if not root.is_dir():
                continue
            for directory in sorted(
                (p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
            ):
                _rmdir(directory)
            _rmdir(root)


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _rmdir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()
