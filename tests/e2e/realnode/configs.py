"""Configuration files of the real node's parts: containerd, the CNI network,
kubelet and kube-proxy.

Only what this machine needs differs from upstream defaults, each with its reason:
the cgroup hierarchy here is v1 (kubelet 1.36 refuses it unless told), the
machine lacks CAP_SYS_RESOURCE (runc cannot give a sandbox the oom_score_adj
it asks for), and every path, socket and cgroup is the run's own so that two
runs, or a run and the machine, never share one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .images import PAUSE_IMAGE
from .network import NodeNetwork

__all__ = ["NodePaths", "cni_config", "containerd_config", "kube_proxy_config", "kubelet_config"]

RUNC = "/usr/sbin/runc"
KUBELET_PORT = 10250


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps its state, all under one work directory."""

    root: Path

    @property
    def containerd_root(self) -> Path:
        return self.root / "containerd" / "root"

    @property
    def containerd_state(self) -> Path:
        return self.root / "containerd" / "state"

    @property
    def containerd_socket(self) -> Path:
        return self.root / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.root / "containerd" / "config.toml"

    @property
    def cni_config_dir(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_state_dir(self) -> Path:
        return self.root / "cni" / "state"

    @property
    def kubelet_root(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.root / "kubelet.yaml"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def images(self) -> Path:
        return self.root / "images"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    return json.dumps(str(value))


def _toml(tables: dict[str, dict[str, Any]], top: dict[str, Any]) -> str:
    lines = [f"{key} = {_toml_value(value)}" for key, value in top.items()]
    for table, values in tables.items():
        lines.append(f"\n[{table}]")
        lines.extend(f"  {key} = {_toml_value(value)}" for key, value in values.items())
    return "\n".join(lines) + "\n"


def containerd_config(paths: NodePaths, cni_bin_dir: Path) -> str:
    """containerd v2's configuration (version 3) for the node's CRI runtime."""
    cri = 'plugins."io.containerd.cri.v1.runtime"'
    return _toml(
        {
            "grpc": {"address": str(paths.containerd_socket)},
            "ttrpc": {"address": f"{paths.containerd_socket}.ttrpc"},
            # No debug or metrics listener: nothing of the node listens beyond what it needs.
            cri: {
                "enable_selinux": False,
                # runc otherwise fails every sandbox here ("can't get final child's
                # PID from pipe: EOF"): the sandbox asks oom_score_adj -998 and the
                # machine lacks CAP_SYS_RESOURCE.
                "restrict_oom_score_adj": True,
                "netns_mounts_under_state_dir": True,
                "enable_cdi": False,
            },
            f"{cri}.containerd": {"default_runtime_name": "runc"},
            f"{cri}.containerd.runtimes.runc": {"runtime_type": "io.containerd.runc.v2"},
            f"{cri}.containerd.runtimes.runc.options": {
                "BinaryName": RUNC,
                "SystemdCgroup": False,
            },
            f"{cri}.cni": {
                "bin_dirs": [str(cni_bin_dir)],
                "conf_dir": str(paths.cni_config_dir),
                "max_conf_num": 1,
            },
            'plugins."io.containerd.cri.v1.images".pinned_images': {"sandbox": PAUSE_IMAGE},
        },
        {
            "version": 3,
            "root": str(paths.containerd_root),
            "state": str(paths.containerd_state),
        },
    )


def cni_config(network: NodeNetwork, paths: NodePaths) -> str:
    """A bridge network with the node as gateway, addresses from the node's pod range,
    host ports, and loopback: what kubelet's pods need to have an address."""
    return json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": "gpu-admission-e2e",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    # The pods' replies reach kube-apiserver by the machine's route to
                    # the pod range: nothing is hidden behind the node's address.
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": network.pod_cidr}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(paths.cni_state_dir),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
                {"type": "loopback"},
            ],
        },
        indent=2,
    )


def kubelet_config(network: NodeNetwork, paths: NodePaths, ca_cert: Path, cgroup_root: str) -> str:
    """The KubeletConfiguration of the node."""
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # kubelet 1.36 refuses a cgroup v1 hierarchy unless told; this machine has no other.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        # The run's own subtree: two runs never share kubepods.
        "cgroupRoot": cgroup_root,
        "containerRuntimeEndpoint": f"unix://{paths.containerd_socket}",
        "address": network.node_ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        "failSwapOn": False,
        "clusterDomain": "cluster.local",
        # No DNS service runs; pods see no resolver rather than the machine's.
        "resolvConf": "",
        # The machine's disk is shared with everything else: never evict the node's
        # pods, nor collect its local images, for disk the rest of the machine uses.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "0%",
            "imagefs.available": "0%",
            "nodefs.inodesFree": "0%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "registerNode": True,
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "shutdownGracePeriod": "0s",
        "localStorageCapacityIsolation": True,
        "maxPods": 40,
    }
    return yaml.safe_dump(config, sort_keys=False)


def kube_proxy_config(network: NodeNetwork, kubeconfig: Path, node_name: str) -> str:
    """kube-proxy in iptables mode, leaving the machine-wide conntrack settings alone."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "hostnameOverride": node_name,
        "bindAddress": network.node_ip,
        "clusterCIDR": network.pod_cidr,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # Zero leaves each sysctl as it is: nf_conntrack_max is the whole machine's.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }
    return yaml.safe_dump(config, sort_keys=False)
