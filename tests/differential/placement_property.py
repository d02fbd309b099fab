"""The property: no pod the engine admits can land on a GPU node it is not granted.

Each pod is judged as kube-apiserver judges it at CREATE in an opted-in namespace (the
calls ``webhook.offline.evaluation.evaluate_pod`` makes for `check`: our mutation, its
patch applied, then validation of the mutated pod), with or without a live inventory of
the cluster. The oracle, not the engine, says on which nodes each admitted pod can land.

Which nodes are GPU nodes is read from each node's own facts (a pool label, GPUs in
`status.allocatable`, GPU Feature Discovery's `nvidia.com/gpu.present`), never from the
kinds of node the policy enumerates. A pod of a class is granted the nodes whose pool
label value is one of its class's pools'; any other pod, no GPU node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
import yaml

from tests.differential.oracle import PlacementOracle
from tests.differential.strategies import GPU_PRESENT, Scenario, describe_node
from webhook.engine import AdmissionRequest, Decision, Engine
from webhook.engine.handlers.twins import gpu_relevant
from webhook.engine.inventory import UNKNOWN, Inventory, node_facts
from webhook.policy import Policy
from webhook.service.inventory import inventory_label_keys

Json = dict[str, Any]

STATIC = "static"
"""No inventory, as `check` judges: only the GPU nodes with the pool label and its
conventional taint count, the nodes the engine can know of without seeing them."""
LIVE = "live"
"""The cluster's nodes in the engine's inventory: every GPU node counts."""


@dataclass(frozen=True)
class Admission:
    pod: Json
    """The pod as created."""
    mutated: Json
    """The pod after our mutation (as created when the mutation refused it)."""
    patch: tuple[Json, ...]
    """Our mutation's JSONPatch."""
    decision: Decision
    """The validation's decision on the mutated pod (the mutation's when it refused it)."""


def admitted_at_create(engine: Engine, pod: Json, inventory: Inventory = UNKNOWN) -> Admission:
    """Mutate, apply the patch, validate the result: the CREATE of `pod` in namespace `ml`."""
    request = AdmissionRequest.pod_create("differential", "ml", pod["metadata"]["name"], pod)
    mutation = engine.mutate(request, inventory)
    if not mutation.allowed:
        return Admission(pod, pod, (), mutation)
    mutated: Json = jsonpatch.apply_patch(pod, list(mutation.patch))
    decision = engine.validate(dataclasses.replace(request, object=mutated), inventory)
    return Admission(pod, mutated, mutation.patch, decision)


def is_gpu_node(policy: Policy, node: Json) -> bool:
    """A GPU node by its own facts: the pool label, GPUs allocatable or GPU Feature
    Discovery's word for it."""
    labels = node["metadata"].get("labels", {})
    allocatable = node.get("status", {}).get("allocatable", {})
    gpus = any(name.startswith("nvidia.com/") and q != "0" for name, q in allocatable.items())
    return policy.pool_label in labels or gpus or labels.get(GPU_PRESENT) == "true"


def has_conventional_taint(policy: Policy, node: Json) -> bool:
    """The node has the pool label and is tainted `<pool label>=<its value>:NoSchedule`."""
    value = node["metadata"].get("labels", {}).get(policy.pool_label)
    taints = node.get("spec", {}).get("taints", ())
    conventional = {"key": policy.pool_label, "value": value, "effect": "NoSchedule"}
    return value is not None and conventional in taints


def judged_nodes(policy: Policy, nodes: Sequence[Json], mode: str) -> list[Json]:
    """The GPU nodes the property is asserted over in `mode`."""
    gpu = [n for n in nodes if is_gpu_node(policy, n)]
    return gpu if mode == LIVE else [n for n in gpu if has_conventional_taint(policy, n)]


def inventory_of(policy: Policy, nodes: Sequence[Json], mode: str) -> Inventory:
    if mode == STATIC:
        return UNKNOWN
    keys = inventory_label_keys(policy)
    facts = (node_facts(n, keys) for n in nodes)
    return Inventory(nodes=tuple(f for f in facts if f is not None))


def granted_pool_values(policy: Policy, pod: Json) -> tuple[str, ...]:
    """The pool label values of the nodes the pod is granted: its class's pools'."""
    workload = pod["metadata"].get("labels", {}).get(policy.workload_label)
    known = policy.classes.get(workload) if workload is not None else None
    return known.pool_label_values if known is not None else ()


def is_granted(policy: Policy, pod: Json, node: Json) -> bool:
    value = node["metadata"].get("labels", {}).get(policy.pool_label)
    return value is not None and value in granted_pool_values(policy, pod)


@dataclass(frozen=True)
class Counterexample:
    policy: Policy
    mode: str
    admission: Admission
    node: Json

    def __repr__(self) -> str:
        """Short, for the list pytest repeats after `describe`."""
        pod, node = self.admission.pod["metadata"]["name"], self.node["metadata"]["name"]
        return f"<{pod} admitted, can land on {node}>"

    def describe(self) -> str:
        policy, decision = self.policy, self.admission.decision
        granted = granted_pool_values(policy, self.admission.mutated)
        grant = (
            f"the nodes labelled {policy.pool_label} In [{', '.join(granted)}]"
            if granted
            else "no GPU node (it has no workload class)"
        )
        inventory = "with the live inventory" if self.mode == LIVE else "without an inventory"
        rules = ", ".join(f"{r.rule} {r.outcome}" for r in decision.rules) or "none reported"
        warnings = "".join(f"\n  warning: {w}" for w in decision.warnings)
        return (
            f"the engine admits a pod that Kubernetes can place on a GPU node it is not "
            f"granted ({policy.source}, {inventory})\n"
            f"the engine's decision: allowed; rules: {rules}{warnings}\n"
            f"the pod is granted {grant}\n"
            f"the node, on which kube-scheduler's own filters let the pod land:\n"
            f"  {describe_node(self.node)}\n"
            f"the pod, as mutated:\n{_yaml(self.admission.mutated)}"
            f"our mutation's patch: {_patch(self.admission)}"
        )


def counterexamples(
    engine: Engine, scenario: Scenario, oracle: PlacementOracle, mode: str
) -> list[Counterexample]:
    """Each admitted pod of the scenario and GPU node it can land on but is not granted.

    Only the pods kube-apiserver sends to the service are the engine's to keep off a
    node: a pod of no class with nothing GPU about it is created without calling it
    (the pods' matchConditions; ``twins.gpu_relevant`` says the same), and one on a GPU
    node without its pool's taint is the gap docs/security.md names first."""
    policy = engine.policy
    inventory = inventory_of(policy, scenario.nodes, mode)
    nodes = judged_nodes(policy, scenario.nodes, mode)
    if not nodes:
        return []
    sent = [pod for pod in scenario.pods if gpu_relevant(policy, pod)]
    admissions = [admitted_at_create(engine, pod, inventory) for pod in sent]
    admitted = [a for a in admissions if a.decision.allowed]
    answers = oracle.placeable([(a.mutated, nodes) for a in admitted])
    return [
        Counterexample(policy, mode, admission, node)
        for admission, placeable in zip(admitted, answers, strict=True)
        for node, lands in zip(nodes, placeable, strict=True)
        if lands and not is_granted(policy, admission.mutated, node)
    ]


def _patch(admission: Admission) -> str:
    if not admission.patch:
        return "none"
    return "\n" + _yaml(list(admission.patch)).rstrip("\n")


def _yaml(value: Any) -> str:
    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=100)
    return "".join(f"  {line}\n" for line in text.splitlines())
