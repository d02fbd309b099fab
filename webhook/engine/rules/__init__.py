"""The validation rules, declared once: ``RULES``, each rule with its name, the pods it is for
and its checks.

The engine judges every pod by ``RULES``; reports list the rules in its order; its
names are those a policy's `enforcement` may give modes (an ``Engine`` refuses a
policy naming another) and those `gpu-admission policy schema` lists. Adding a rule
is adding one ``Rule`` below: a name, the pods it is for (a ``Scope`` of where pods
stand, see context.py) and its checks, each a function of a ``RuleContext`` run at a
``Step`` of judging a pod (see registry.py). The modules beside this one hold the
checks, one rule or a few related ones each.
"""

from webhook.engine.rules import (
    capacity,
    claims,
    device_access,
    device_env,
    host_access,
    node_name,
    placement,
    priority,
    quantities,
    sharing,
    visibility,
    workload_class,
)
from webhook.engine.rules.context import (
    CLASS_PODS,
    EVERY_POD,
    EVERY_POD_BUT_UNKNOWN_CLASS,
    NO_CLASS,
    NO_CLASS_NO_GPU,
    WANTING_A_CLASS,
    RuleContext,
    Scope,
    Standing,
)
from webhook.engine.rules.registry import Check, Findings, Registry, Rule, Step

__all__ = [
    "CLASS_PODS",
    "EVERY_POD",
    "EVERY_POD_BUT_UNKNOWN_CLASS",
    "NO_CLASS",
    "NO_CLASS_NO_GPU",
    "RULES",
    "WANTING_A_CLASS",
    "Check",
    "Findings",
    "Registry",
    "Rule",
    "RuleContext",
    "Scope",
    "Standing",
    "Step",
]

NODE_NAME = Check(Step.NODE, EVERY_POD_BUT_UNKNOWN_CLASS, node_name.check_node_name)
"""The node a pod names in spec.nodeName: a GPU node for a pod of no class, another pool or
GPU model for a class pod."""

FITS_A_NODE = Check(Step.CAPACITY, CLASS_PODS, capacity.check_capacity)
"""Whole GPUs against the largest node of the class's pools, MIG slices against theirs."""

CLAIM_RULE_PODS = NO_CLASS_NO_GPU | CLASS_PODS
"""The claims a pod names are judged once it has the class it needs: a GPU pod without one
is told only that."""

RULES = Registry(
    [
        Rule(
            visibility.RULE,
            applies=EVERY_POD,
            checks=(Check(Step.CONTAINERS, EVERY_POD, visibility.check),),
        ),
        Rule(
            device_env.RULE,
            applies=EVERY_POD,
            checks=(Check(Step.CONTAINERS, EVERY_POD, device_env.check),),
        ),
        Rule(
            device_access.ANNOTATIONS,
            applies=EVERY_POD,
            checks=(Check(Step.CONTAINERS, EVERY_POD, device_access.check_annotations),),
        ),
        Rule(
            device_access.MOUNTS,
            applies=EVERY_POD,
            checks=(Check(Step.CONTAINERS, EVERY_POD, device_access.check_mounts),),
        ),
        Rule(
            host_access.RULE,
            applies=EVERY_POD,
            checks=(Check(Step.CONTAINERS, EVERY_POD, host_access.check),),
        ),
        Rule(
            device_access.PRIVILEGED,
            applies=EVERY_POD,
            checks=(Check(Step.CONTAINERS, EVERY_POD, device_access.check_privileged),),
        ),
        Rule(
            workload_class.RULE,
            applies=EVERY_POD,
            checks=(Check(Step.CLASS_LABEL, WANTING_A_CLASS, workload_class.check),),
        ),
        Rule(
            placement.NON_GPU,
            applies=NO_CLASS_NO_GPU,
            checks=(
                Check(Step.PLACEMENT, NO_CLASS_NO_GPU, placement.check_non_gpu_placement),
                NODE_NAME,
            ),
        ),
        Rule(
            placement.WRONG_POOL,
            applies=CLASS_PODS,
            checks=(Check(Step.PLACEMENT, CLASS_PODS, placement.check_class_placement), NODE_NAME),
        ),
        Rule(
            placement.MODEL,
            applies=CLASS_PODS,
            checks=(Check(Step.MODEL_LABEL, CLASS_PODS, placement.check_model), NODE_NAME),
        ),
        Rule(
            quantities.RULE,
            applies=CLASS_PODS,
            checks=(Check(Step.QUANTITIES, CLASS_PODS, quantities.check_quantities),),
        ),
        Rule(
            capacity.COUNT,
            applies=CLASS_PODS,
            checks=(Check(Step.REQUEST, CLASS_PODS, capacity.check_requests_gpu), FITS_A_NODE),
        ),
        Rule(capacity.MIG, applies=CLASS_PODS, checks=(FITS_A_NODE,)),
        Rule(
            sharing.RULE,
            applies=CLASS_PODS,
            checks=(Check(Step.REQUEST, CLASS_PODS, sharing.check),),
        ),
        Rule(
            priority.RULE,
            applies=CLASS_PODS,
            checks=(Check(Step.PRIORITY, EVERY_POD_BUT_UNKNOWN_CLASS, priority.check_priority),),
        ),
        Rule(
            claims.RULE,
            applies=CLAIM_RULE_PODS,
            checks=(
                Check(Step.CONTAINERS, CLAIM_RULE_PODS, claims.check_claims),
                Check(Step.CAPACITY, CLASS_PODS, claims.check_claim_capacity),
                Check(Step.CAPACITY, CLASS_PODS, claims.check_device_plugin_pools),
            ),
        ),
        Rule(claims.NOT_JUDGED, applies=CLAIM_RULE_PODS, checks=()),
    ]
)
"""Every validation rule, in the order reports list them."""
