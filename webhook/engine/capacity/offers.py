"""What one pool offers now, asked the same way however its GPUs are reached.

A pool's schedulable GPU nodes publish whole GPUs and MIG devices either as allocatable
extended resources (the device plugin's ``nvidia.com/gpu`` and ``nvidia.com/mig-*``,
``webhook.engine.capacity.now``) or as devices in ResourceSlices (Dynamic Resource
Allocation, ``webhook.engine.dra.capacity``). Both answer ``PoolOffer``: the node with
the most whole GPUs or MIG devices of a profile, their total, the MIG profiles offered,
per GPU model or for any model. The rules ask a pool through it and word what it says
once (``webhook.engine.rules.capacity``, ``webhook.engine.rules.claims``); which way a pod
reaches GPUs only decides which of the pool's two offers is asked (``CapacityNow.offer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Protocol

__all__ = ["Largest", "PoolOffer", "Reached"]


class Reached(Enum):
    """How a pod reaches a pool's GPUs."""

    DEVICE_PLUGIN = "device plugin"
    """Extended resources in the containers' requests and limits."""
    DRA = "DRA"
    """ResourceClaims the pod names."""


@dataclass(frozen=True, slots=True)
class Largest:
    """The node of a pool with the most of something, and how much it has."""

    amount: Decimal
    node: str


class PoolOffer(Protocol):
    """What the schedulable GPU nodes of one pool offer now, one way."""

    @property
    def name(self) -> str:
        """The policy's pool."""
        ...

    @property
    def node_names(self) -> tuple[str, ...]:
        """Its nodes offering GPUs this way, in name order."""
        ...

    @property
    def models(self) -> frozenset[str]:
        """The policy's GPU models of those nodes."""
        ...

    def largest_gpus(self, model: str | None = None) -> Largest | None:
        """The node with the most whole GPUs (of `model`; None: any model), the first by
        name on a tie; None when no node has one."""
        ...

    def total_gpus(self, model: str | None = None) -> Decimal:
        """Its whole GPUs (of `model`) summed over the nodes."""
        ...

    def largest_mig(self, profile: str, model: str | None = None) -> Largest | None:
        """The node with the most MIG devices of `profile` (on GPUs of `model`)."""
        ...

    def mig_profiles(self, model: str | None = None) -> list[str]:
        """The MIG profiles some node offers (on GPUs of `model`), sorted."""
        ...
