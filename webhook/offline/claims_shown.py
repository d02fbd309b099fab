"""What a claim of Dynamic Resource Allocation asks for, as the reports show it.

One line per claim, in the words of the rules' messages, so a reader can tell at a glance
which claims were judged, on what, and which were not:

    claim 'gpu' (ResourceClaimTemplate 'one-gpu'): 1 GPU of DeviceClass gpu.nvidia.com
    claim 'nic' (ResourceClaimTemplate 'nic'): 1 device of DeviceClass nic.example.com
    claim 'big' (ResourceClaimTemplate 'big'): not given, so not judged

A claim's requests are separated by `;`, a request's alternatives (``firstAvailable``)
by `or`. A request of a DeviceClass the policy does not know as GPUs asks for "devices":
the rules leave it alone, and the report says so by not calling them GPUs.
"""

from __future__ import annotations

from typing import Any

from webhook.engine.dra.claims import Ask, ClaimAsks
from webhook.engine.dra.pod_claims import NOT_GIVEN, PodClaim

NO_SOURCE = "names no ResourceClaimTemplate or ResourceClaim"


def requests_text(asks: ClaimAsks) -> list[str]:
    """Each request of a claim, its alternatives joined by `or`."""
    return [
        " or ".join(_ask_text(ask) for ask in request.alternatives) or "no devices"
        for request in asks.requests
    ]


def asks_text(asks: ClaimAsks) -> str:
    """What a claim asks for, on one line."""
    return "; ".join(requests_text(asks)) or "no devices"


def pod_claim_text(claim: PodClaim) -> str:
    """`claim 'gpu' (ResourceClaimTemplate 'one-gpu'): 1 GPU of DeviceClass gpu.nvidia.com`."""
    return f"{claim.describe()}: {_state(claim)}"


def pod_claim_data(claim: PodClaim) -> dict[str, Any]:
    """`{name, source: {kind, name} or null, asks: [each request], problem: why not read}`."""
    source = claim.source
    return {
        "name": claim.name,
        "source": {"kind": source.kind, "name": source.name} if source else None,
        "asks": requests_text(claim.asks) if claim.asks else [],
        "problem": claim.problem,
    }


def _state(claim: PodClaim) -> str:
    if claim.asks is not None:
        return asks_text(claim.asks)
    if claim.source is None:
        return NO_SOURCE
    if claim.problem == NOT_GIVEN:
        return "not given, so not judged"
    return claim.problem or "not known"


def _ask_text(ask: Ask) -> str:
    if ask.is_gpu:
        return ask.describe()
    amount = "all" if ask.all_devices else str(ask.count)
    return f"{amount} device{'' if amount == '1' else 's'} of DeviceClass {ask.device_class}"
