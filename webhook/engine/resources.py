"""GPU resources of a pod: which names count, and the effective request.

`nvidia.com/gpu` and every `nvidia.com/mig-<profile>` are GPU resources. The
effective request is computed the way kube-scheduler does: the larger of the
app containers plus sidecars, and each ordinary init container plus the
sidecars started before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from webhook.engine.gpu_shares import shares_asked
from webhook.engine.pod import Container, PodView
from webhook.policy.compiled import Policy


def pod_requests_gpu(policy: Policy, pod: PodView) -> bool:
    """Whether a container asks for a GPU resource, or the pod for a GPU share by
    annotation (``webhook.engine.gpu_shares``)."""
    return any(c.requests_gpu() for c in pod.runnable_containers()) or bool(shares_asked(pod.raw))


def effective_gpu_request(policy: Policy, pod: PodView) -> dict[str, Decimal]:
    """Per GPU resource, what the scheduler will look for on one node."""
    app_total: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container in pod.init_containers:
        own = _readable_amounts(policy, container)
        if container.is_sidecar:
            _add(sidecars, own.items())
            _add(app_total, own.items())
            _raise_to(init_peak, sidecars)
        else:
            candidate = dict(sidecars)
            _add(candidate, own.items())
            _raise_to(init_peak, candidate)
    for container in pod.containers:
        _add(app_total, _readable_amounts(policy, container).items())
    _raise_to(app_total, init_peak)
    return {name: amount for name, amount in app_total.items() if amount > 0}


def _readable_amounts(policy: Policy, container: Container) -> dict[str, Decimal]:
    amounts = {}
    for quantity in container.gpu:
        value = quantity.value
        if value is not None and value > 0:
            amounts[quantity.resource] = value
    return amounts


def _add(total: dict[str, Decimal], items: Iterable[tuple[str, Decimal]]) -> None:
    for name, amount in items:
        total[name] = total.get(name, Decimal(0)) + amount


def _raise_to(total: dict[str, Decimal], other: Mapping[str, Decimal]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, Decimal(0)):
            total[name] = amount
