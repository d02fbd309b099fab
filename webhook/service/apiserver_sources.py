"""kube-apiserver's addresses kept current for the admission port's door.

The door never paces a connection from kube-apiserver (``webhook.http.tls_gate``).
Addresses given with ``--apiserver-source`` are always its; with a client of the
cluster, the service also looks, at start and every ``INTERVAL_SECONDS``, at the
addresses the ``kubernetes`` Service's EndpointSlice lists (``webhook.kube.apiserver_endpoints``).
A look that fails keeps what the last one found. Where kube-apiserver reaches the
service from another address than it advertises (through a konnectivity proxy, or a
host address on the pod network), give that address with ``--apiserver-source``; a
connection cut for rate is logged with its source, so such an address shows itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from webhook.http.tls_gate import ApiserverSources

log = logging.getLogger("gpu_admission.service")

INTERVAL_SECONDS = 300.0

ReadAddresses = Callable[[], list[str]]


async def keep_learning(
    sources: ApiserverSources, read: ReadAddresses, interval: float = INTERVAL_SECONDS
) -> None:
    """Look at kube-apiserver's addresses now and every `interval` seconds, forever."""
    while True:
        try:
            found = await asyncio.to_thread(read)
        except Exception as error:  # the client raises many kinds; the last look stands
            log.warning(
                "cannot read kube-apiserver's addresses; the last ones found are kept",
                extra={"reason": str(error)[:200]},
            )
        else:
            if frozenset(found) != sources.learned:
                log.info("kube-apiserver's addresses", extra={"addresses": sorted(found)})
            sources.learn(found)
        await asyncio.sleep(interval)
