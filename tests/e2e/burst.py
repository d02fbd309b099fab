"""Bursts of pod (or Job) creations through kube-apiserver, as tenants with their own tokens
send them: many at once from one, a steady trickle from another, every answer kept.

Creations are server-side dry runs (``dryRun=All``): they pass authentication, API
Priority and Fairness, the admission webhooks and validation exactly as real ones do,
and leave nothing behind, so a burst can be repeated on the same namespace.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .tenants import Tenant

Manifest = Callable[[int], dict[str, Any]]


@dataclass
class Outcomes:
    """What kube-apiserver answered one tenant."""

    sent: int = 0
    created: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    """Why each failed: its status code and the start of its message."""

    def add(self, reply: httpx.Response | BaseException) -> None:
        self.sent += 1
        if isinstance(reply, BaseException):
            self.failures[f"{type(reply).__name__}: {reply}"[:160]] += 1
        elif reply.status_code == 201:
            self.created += 1
        else:
            try:
                message = str(reply.json().get("message", reply.text))
            except ValueError:  # not a Status: a proxy's or a server's own text
                message = reply.text
            self.failures[f"{reply.status_code} {message}"[:160]] += 1

    @property
    def failed(self) -> int:
        return sum(self.failures.values())


PODS = "api/v1"
JOBS = "apis/batch/v1"


class Creations:
    """One tenant's dry-run creations of pods (or of another `resource` of `api`)."""

    def __init__(
        self, tenant: Tenant, manifest: Manifest, api: str = PODS, resource: str = "pods"
    ) -> None:
        self.tenant = tenant
        self.manifest = manifest
        self.outcomes = Outcomes()
        namespace = tenant.namespace
        self._url = (
            f"{tenant.controlplane.api_url}/{api}/namespaces/{namespace}/{resource}?dryRun=All"
        )
        # The cluster's CA only: a context holding a client certificate would be taken
        # for that user's, not the tenant's token.
        context = ssl.create_default_context(cafile=str(tenant.controlplane.ca_path))
        self._client = httpx.AsyncClient(
            verify=context,
            headers={"Authorization": f"Bearer {tenant.token}"},
            timeout=60,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
        )
        self._number = 0

    async def one(self) -> None:
        self._number += 1
        try:
            reply: httpx.Response | BaseException = await self._client.post(
                self._url, json=self.manifest(self._number)
            )
        except httpx.HTTPError as error:
            reply = error
        self.outcomes.add(reply)

    async def burst(self, size: int) -> None:
        """`size` creations at once."""
        await asyncio.gather(*(self.one() for _ in range(size)))

    async def trickle(self, count: int, every: float) -> None:
        """`count` creations one after another, `every` seconds apart."""
        for _ in range(count):
            await self.one()
            await asyncio.sleep(every)

    async def close(self) -> None:
        await self._client.aclose()


async def noisy_beside_victim(
    noisy: Creations, victim: Creations, rounds: int, size: int, victim_count: int
) -> None:
    """`rounds` bursts of `size` from `noisy`, while `victim` trickles `victim_count`
    creations over the same time."""

    async def bursts() -> None:
        for _ in range(rounds):
            await noisy.burst(size)

    await asyncio.gather(bursts(), victim.trickle(victim_count, every=0.05))
