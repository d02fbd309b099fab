"""Rules: a pod must fit on one node of its pools, and MIG slices must exist there.

The effective GPU request (see resources.effective_gpu_request) is compared
with the largest node the policy knows in the class's pools, and each
`nvidia.com/mig-<profile>` with what the pools' GPU products offer per the
MIG catalog.
"""

from __future__ import annotations

import re
from decimal import Decimal

from webhook.engine.decision import Violation
from webhook.engine.pod import PodView
from webhook.engine.quantities import format_count
from webhook.engine.resources import effective_gpu_request
from webhook.policy.compiled import GpuModel, Policy, Pool, WorkloadClass

COUNT = "gpu-count"
MIG = "mig-profile"
MIG_PROFILE = re.compile(r"^[1-9][0-9]?g\.[1-9][0-9]*gb(\.me|\.me\.all|\.gfx|-me)?$")


def check_capacity(policy: Policy, pod: PodView, workload: WorkloadClass) -> list[Violation]:
    model = pod.labels.get(policy.gpu_model_label)
    model = model if model in workload.models else None
    pools = [p for p in policy.pools_of(workload) if model is None or model in p.models]
    violations = []
    for resource, amount in effective_gpu_request(policy, pod).items():
        if amount != amount.to_integral_value():
            continue  # the quantity rule names the container
        if resource == policy.gpu_resource:
            violations += _whole_gpus(policy, pools, amount, model)
        else:
            violations += _mig_slices(policy, pools, resource, amount, model)
    return violations


def _whole_gpus(
    policy: Policy, pools: list[Pool], amount: Decimal, model: str | None
) -> list[Violation]:
    sizes = {p.name: _largest_node(p, model) for p in pools}
    if any(amount <= size for size in sizes.values()):
        return []
    largest = max(sizes, key=lambda name: sizes[name])
    return [
        Violation(
            COUNT,
            f"pod requests {format_count(amount)} {policy.gpu_resource}; the largest node in "
            f"pool {largest}{_of_model(model)} has {sizes[largest]}; split the work into pods "
            f"of at most {sizes[largest]}",
        )
    ]


def _mig_slices(
    policy: Policy, pools: list[Pool], resource: str, amount: Decimal, model: str | None
) -> list[Violation]:
    profile = resource.removeprefix(policy.mig_prefix)
    if not MIG_PROFILE.match(profile):
        return [
            Violation(
                MIG,
                f"{resource} is not a MIG resource name; expected {policy.mig_prefix}"
                f"<compute>g.<memory>gb such as {policy.mig_prefix}1g.5gb",
            )
        ]
    mixed = [p for p in pools if p.mig_strategy == "mixed"]
    if not mixed:
        return [
            Violation(
                MIG,
                f"pod requests {resource} but pool {' or '.join(p.name for p in pools)} offers no "
                f"MIG slices ({', '.join(f'{p.name}: {p.mig_strategy}' for p in pools)}); "
                f"request {policy.gpu_resource} instead",
            )
        ]
    capacity = {p.name: p.mig_slices_per_node(profile, model) for p in mixed}
    if not any(capacity.values()):
        offered = sorted(
            {name for p in mixed for m in _models(p, model) for name in m.mig_profiles}
        )
        products = sorted({m.product or m.name for p in mixed for m in _models(p, model)})
        return [
            Violation(
                MIG,
                f"MIG profile {profile} is not offered by {', '.join(products)} in pool "
                f"{' or '.join(capacity)}; offered: {', '.join(offered)}",
            )
        ]
    most = max(capacity.values())
    if amount > most:
        pool = max(capacity, key=lambda name: capacity[name])
        return [
            Violation(
                MIG,
                f"pod requests {format_count(amount)} {resource}; a node in pool {pool} holds "
                f"at most {most} (per-GPU maximum x GPUs per node)",
            )
        ]
    return []


def _largest_node(pool: Pool, model: str | None) -> int:
    if model is not None and model in pool.models:
        return pool.models[model].gpus_per_node
    return pool.gpus_per_node


def _models(pool: Pool, model: str | None) -> list[GpuModel]:
    return (
        [pool.models[model]]
        if model is not None and model in pool.models
        else list(pool.models.values())
    )


def _of_model(model: str | None) -> str:
    return f" with model {model}" if model else ""
