"""The real node's network: a namespace of the test's own, with no route out.

The node (containerd, kubelet, kube-proxy) and its pods live in a network
namespace the harness creates. One veth pair joins it to the machine: the
machine's end holds the address kube-apiserver binds (``host_ip``), the node's
end the node's address (``node_ip``). The machine routes the node's pod range
and Service range through the pair, and the namespace has no default route, so
a packet to a Service address that kube-proxy has no rule for is dropped inside
the namespace: a missing rule can only fail a connection, never send traffic
off this machine.

Addresses come from one slot of ``10.200.<slot>.0/30`` (the link),
``10.201.<slot>.0/24`` (pods) and ``10.202.<slot>.0/24`` (Services); a slot is
taken by creating its namespace, which fails if another run holds it, so two
test runs side by side never share one. Creating refuses ranges the machine
already routes anywhere but through its default route.
"""

from __future__ import annotations

import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NetworkUnavailable", "NodeNetwork"]

SLOTS = range(1, 250)
NETNS_DIR = Path("/run/netns")


class NetworkUnavailable(RuntimeError):
    """The machine cannot give the node a namespace of its own (not root, no ``ip``)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@dataclass(frozen=True)
class NodeNetwork:
    """The addresses of one slot; :meth:`create` makes them real, :meth:`delete` undoes it."""

    slot: int

    @property
    def name(self) -> str:
        return f"gpa-node-{self.slot}"

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    @property
    def host_device(self) -> str:
        return f"gpah{self.slot}"

    @property
    def node_device(self) -> str:
        return f"gpan{self.slot}"

    @property
    def host_ip(self) -> str:
        return f"10.200.{self.slot}.1"

    @property
    def node_ip(self) -> str:
        return f"10.200.{self.slot}.2"

    @property
    def pod_cidr(self) -> str:
        return f"10.201.{self.slot}.0/24"

    @property
    def service_cidr(self) -> str:
        return f"10.202.{self.slot}.0/24"

    @property
    def kubernetes_service_ip(self) -> str:
        """The first address of the Service range: the ``kubernetes`` Service's."""
        return f"10.202.{self.slot}.1"

    @classmethod
    def create(cls) -> NodeNetwork:
        """Take the first free slot and build its namespace, pair and routes."""
        for slot in SLOTS:
            network = cls(slot)
            if _ip("netns", "add", network.name, check=False).returncode != 0:
                continue  # another run holds this slot (or a leftover: see delete)
            try:
                network._refuse_routed_ranges()
                network._wire()
            except BaseException:
                network.delete()
                raise
            return network
        raise NetworkUnavailable(f"no free slot among gpa-node-{SLOTS[0]}..{SLOTS[-1]}")

    def _refuse_routed_ranges(self) -> None:
        for cidr in (f"10.200.{self.slot}.0/30", self.pod_cidr, self.service_cidr):
            routes = _ip("-4", "route", "show", "table", "all", "to", "match", cidr).stdout
            for line in routes.splitlines():
                destination = line.split()[0] if line.split() else ""
                if destination in ("default", "broadcast", "local"):
                    continue
                if ipaddress.ip_network(destination, strict=False).overlaps(
                    ipaddress.ip_network(cidr)
                ):
                    raise NetworkUnavailable(f"{cidr} is already routed here: {line}")

    def _wire(self) -> None:
        name = self.name
        _ip("link", "add", self.host_device, "type", "veth", "peer", "name", self.node_device)
        _ip("link", "set", self.node_device, "netns", name)
        _ip("addr", "add", f"{self.host_ip}/30", "dev", self.host_device)
        _ip("link", "set", self.host_device, "up")
        inside = ("-n", name)
        _ip(*inside, "link", "set", "lo", "up")
        _ip(*inside, "addr", "add", f"{self.node_ip}/30", "dev", self.node_device)
        _ip(*inside, "link", "set", self.node_device, "up")
        # Pods and Services are reached through the node; nothing else is routed there.
        _ip("route", "add", self.pod_cidr, "via", self.node_ip, "dev", self.host_device)
        _ip("route", "add", self.service_cidr, "via", self.node_ip, "dev", self.host_device)
        # The node forwards between the pair and its pods' bridge, and hands bridged
        # traffic to iptables, as kube-proxy needs of every node.
        for key in ("net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet"):
            subprocess.run(
                ["ip", "netns", "exec", name, "sysctl", "-qw", f"{key}=1"],
                check=True,
                capture_output=True,
            )

    def delete(self) -> None:
        """Remove the namespace (its end of the pair, and so the machine's end and
        both routes, go with it); safe to call twice."""
        _ip("link", "delete", self.host_device, check=False)
        _ip("netns", "delete", self.name, check=False)
