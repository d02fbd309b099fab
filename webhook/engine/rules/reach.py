"""Whether a pod can land on a GPU node at all: what the runtime's device checks ask first.

A pod of a workload class, or one asking for GPUs, is headed for GPU nodes. A pod of no
class asking for none can reach one only as far as its tolerations and node selection let
it (and the non-gpu-placement rule refuses it then); on a node without GPUs what the
NVIDIA runtime honours does nothing.
"""

from __future__ import annotations

from webhook.engine.placement import reach_of
from webhook.engine.rules.context import RuleContext, Standing


def may_reach_gpu_node(context: RuleContext) -> bool:
    if context.standing is not Standing.NO_CLASS_NO_GPU:
        return True
    kinds = (*context.placement.candidates(context.pod), *context.now.gpu_node_kinds)
    return any(r.possibly for r in reach_of(context.policy, context.pod, kinds))
