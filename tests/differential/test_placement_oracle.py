"""No pod the engine admits can land on a GPU node it is not granted: asked of Kubernetes.

Hypothesis generates clusters labelled as real clusters are and pods as users write them
(tests/differential/strategies.py); each pod is judged as at its CREATE, and kube-
scheduler's own filters, in the placement oracle, say where each admitted pod can land
(tests/differential/placement_property.py). The shipped default and overflow policies are
searched, without an inventory (as `check` judges) and with the cluster's nodes in it.

GPU_ADMISSION_DIFFERENTIAL_EXAMPLES sets the examples of each search (300; `make fuzz`
runs 20,000). The search is derandomized, so that CI fails or passes the same way each
time; a fault planted in the engine shows that it finds holes.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, find, given, settings

from tests.differential.oracle import PlacementOracle
from tests.differential.placement_property import LIVE, STATIC, counterexamples
from tests.differential.strategies import REQUIRED, Scenario, node, scenarios, taint
from webhook.engine import Engine
from webhook.policy import Policy, load_default_policy, load_policy_file

POLICIES = Path(__file__).resolve().parents[2] / "policies"
SHIPPED = {
    "default": load_default_policy(),
    "overflow": load_policy_file(POLICIES / "overflow.yaml"),
}
ENGINES = {name: Engine(policy) for name, policy in SHIPPED.items()}

SEARCH = settings(
    max_examples=int(os.environ.get("GPU_ADMISSION_DIFFERENTIAL_EXAMPLES", "300")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def a_training_node_without_its_model_label() -> Scenario:
    """The known hole: a pod of no class tolerating every pool taint, kept by its affinity
    to nodes with a pool label and without a model label, and a training node that GPU
    Feature Discovery has not labelled with its model yet."""
    training = node(
        "gpu-0",
        {"gpu-pool": "training"},
        [taint("gpu-pool", "training", "NoSchedule")],
        {"nvidia.com/gpu": "8"},
    )
    requirements = [
        {"key": "gpu-pool", "operator": "Exists"},
        {"key": "nvidia-gpu-model", "operator": "DoesNotExist"},
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod-0", "namespace": "ml", "labels": {"app": "pod-0"}},
        "spec": {
            "containers": [{"name": "app", "image": "registry.example/app:1"}],
            "tolerations": [{"key": "gpu-pool", "operator": "Exists"}],
            "affinity": {
                "nodeAffinity": {
                    REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": requirements}]}
                }
            },
        },
    }
    return Scenario((training,), (pod,))


KNOWN_HOLE = a_training_node_without_its_model_label()


def with_only_listed_node_kinds(policy: Policy) -> Engine:
    """The planted fault: an engine that knows only the nodes the policy lists (its pools
    with their models), not those of a model it does not list, without a model label or
    of a pool it does not name."""
    listed = tuple(k for k in policy.node_kinds if getattr(k, "listed", True))
    return Engine(dataclasses.replace(policy, node_kinds=listed))


@pytest.mark.parametrize("mode", [STATIC, LIVE])
@pytest.mark.parametrize("policy", list(SHIPPED))
def test_no_admitted_pod_can_land_on_a_gpu_node_it_is_not_granted(
    policy: str, mode: str, oracle: PlacementOracle
) -> None:
    engine = ENGINES[policy]

    @SEARCH
    @given(scenarios(engine.policy))
    @example(KNOWN_HOLE)
    def no_counterexample(scenario: Scenario) -> None:
        found = counterexamples(engine, scenario, oracle, mode)
        assert not found, found[0].describe()

    no_counterexample()


def test_the_known_hole_is_found_in_an_engine_that_knows_only_listed_nodes(
    oracle: PlacementOracle,
) -> None:
    faulty = with_only_listed_node_kinds(SHIPPED["default"])

    assert counterexamples(faulty, KNOWN_HOLE, oracle, STATIC)


def test_the_search_finds_a_hole_in_an_engine_that_knows_only_listed_nodes_by_itself(
    oracle: PlacementOracle,
) -> None:
    faulty = with_only_listed_node_kinds(SHIPPED["default"])

    # It stops at the first it finds: within a few hundred examples (within 360 for each
    # of 30 seeds tried). The first found is enough, so it is not shrunk.
    found = find(
        scenarios(faulty.policy),
        lambda scenario: bool(counterexamples(faulty, scenario, oracle, STATIC)),
        settings=settings(
            SEARCH, max_examples=max(SEARCH.max_examples, 1000), phases=[Phase.generate]
        ),
    )

    assert counterexamples(faulty, found, oracle, STATIC)
