"""Rule: a class pod asks for a GPU share only of a pool that shares its GPUs that way.

A share (``webhook.engine.gpu_shares``) is met only by nodes whose GPUs are handed out
that way: a KAI fraction by nodes KAI schedules, a Volcano vGPU by nodes whose device
plugin advertises vGPUs. A class whose pools hand out whole GPUs would place such a pod
where nothing can meet it (Pending forever), so it is refused, naming what asks for the
share and the pools' ``sharing``.
"""

from __future__ import annotations

from webhook.engine.decision import Violation, shorten
from webhook.engine.gpu_shares import MECHANISMS, share_asks
from webhook.engine.rules.context import RuleContext

RULE = "gpu-sharing"


def check(context: RuleContext) -> list[Violation]:
    asks = share_asks(context.pod.raw)
    if not asks:
        return []
    workload = context.known_class
    pools = context.policy.pools_of(workload)
    offered = {pool.sharing for pool in pools}
    violations = []
    for mechanism in dict.fromkeys(ask.mechanism for ask in asks):
        if mechanism in offered:
            continue
        what = ", ".join(ask.what for ask in asks if ask.mechanism == mechanism)
        shared = ", ".join(f"pool {pool.name} shares {pool.sharing}" for pool in pools)
        violations.append(
            Violation(
                RULE,
                f"{workload.name} pod asks for {shorten(what, 120)} ({MECHANISMS[mechanism]}), "
                f"but no pool of its class shares GPUs that way ({shared}); ask for whole "
                f"{context.policy.gpu_resource}, or give a pool of the class "
                f"`sharing: {mechanism}` where its nodes do",
            )
        )
    return violations
