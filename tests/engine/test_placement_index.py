"""The kinds of node a pod can possibly reach, found by index (webhook/engine/placement_index.py).

The index must never leave out a kind the pod possibly reaches: the rules judge only
its candidates, so a kind left out would be a wrong pool not reported.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import pod
from webhook.engine.placement import reach_of
from webhook.engine.placement_index import PlacementIndex
from webhook.engine.pod import read_pod
from webhook.policy import load_default_policy, load_policy_text
from webhook.policy.compiled import Policy

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

# Pools that share taint keys, hold two taints, no blocking taint (none, or only
# PreferNoSchedule) or a NoExecute one; models shared between pools.
POLICY_TEXT = """
apiVersion: gpu-admission.io/v1alpha1
kind: Policy
nodeLabels: {pool: gpu-pool, model: gpu-model}
pools:
  a:
    gpusPerNode: 8
    models: {A100: {product: A100-SXM4-40GB}, V100: {product: V100-SXM2-32GB}}
  b:
    gpusPerNode: 8
    taints:
      - {key: gpu-pool, value: b}
      - {key: shared, value: gpu}
    models: {A100: {product: A100-SXM4-40GB}}
  c:
    gpusPerNode: 8
    taints: [{key: shared, value: gpu, effect: NoExecute}, {key: shared, value: gpu}]
    models: {L40S: {product: L40S}}
  d:
    gpusPerNode: 8
    taints: []
    models: {V100: {product: V100-SXM2-32GB}}
  e:
    gpusPerNode: 8
    taints: [{key: soft, value: x, effect: PreferNoSchedule}]
    models: {V100: {product: V100-SXM2-32GB}}
classes:
  one: {pools: [a], priorityClass: {name: one, value: 10}}
  two: {pools: [b, c], priorityClass: {name: two, value: 20}}
  three: {pools: [d], priorityClass: {name: three, value: 30}}
"""

POLICIES = {
    "mixed taints": load_policy_text(POLICY_TEXT, "test policy"),
    "default": load_default_policy(),
}

LABELS = ("gpu-pool", "gpu-model", "nvidia-gpu-model", "rack")
TAINT_KEYS = ("gpu-pool", "shared", "soft", "rack", "")
VALUES = ("a", "b", "c", "d", "inference", "training", "A100", "V100", "L40S", "gpu", "x", "")
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule", "")


def _optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


requirements = st.fixed_dictionaries(
    {"key": st.sampled_from(LABELS), "operator": st.sampled_from(OPERATORS)},
    optional={"values": st.lists(st.sampled_from(VALUES), max_size=3)},
)
terms = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": st.lists(requirements, max_size=3),
        "matchFields": st.lists(requirements, max_size=1),
    },
)
tolerations = st.fixed_dictionaries(
    {},
    optional={
        "key": st.sampled_from(TAINT_KEYS),
        "operator": st.sampled_from(("Equal", "Exists", "Bogus")),
        "value": st.sampled_from(VALUES),
        "effect": st.sampled_from(EFFECTS),
    },
)
specs = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(st.sampled_from(LABELS), st.sampled_from(VALUES)),
        "affinity": st.builds(
            lambda t: {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": t}}},
            st.lists(terms, max_size=3),
        ),
        "tolerations": st.lists(tolerations, max_size=4),
    },
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(POLICIES)),
    specs,
    st.sampled_from(("one", "two", "three", "inference", "training", None)),
)
def test_no_kind_the_pod_possibly_reaches_is_left_out(
    policy_name: str, spec: dict[str, Any], workload: str | None
) -> None:
    policy = POLICIES[policy_name]
    view = read_pod(pod(**spec), policy)
    position = {id(kind): index for index, kind in enumerate(policy.node_kinds)}
    found = PlacementIndex.of(policy).candidates(view, workload)
    candidates = [position[id(k)] for k in found]
    reachable = [position[id(r.kind)] for r in reach_of(policy, view) if r.possibly]
    assert set(reachable) <= set(candidates)
    assert candidates == sorted(candidates)
    if workload in policy.classes:
        pools = policy.classes[workload].pools
        own = [position[id(k)] for k in policy.node_kinds if k.pool in pools]
        assert set(own) <= set(candidates)


def kinds_of(policy: Policy, spec: dict[str, Any], workload: str | None = None) -> list[str]:
    candidates = PlacementIndex.of(policy).candidates(read_pod(pod(**spec), policy), workload)
    return [f"{k.pool}/{k.model or k.shape}" for k in candidates]


def pool_in(*values: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "gpu-pool", "operator": "In", "values": list(values)}]}
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [term]}}}


@pytest.mark.parametrize(
    ("spec", "workload", "expected"),
    [
        ({"affinity": pool_in("b")}, None, ["b/A100", "b/unlisted-model", "b/no-model"]),
        ({"affinity": pool_in("b")}, "one", ["a/A100", "a/V100", "a/unlisted-model", "a/no-model", "b/A100", "b/unlisted-model", "b/no-model"]),
        ({"nodeSelector": {"gpu-pool": "b", "gpu-model": "V100"}}, None, ["b/unlisted-model"]),
        ({"nodeSelector": {"rack": "r1"}}, None, ["d/V100", "d/unlisted-model", "d/no-model", "e/V100", "e/unlisted-model", "e/no-model"]),
        ({"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu-pool", "operator": "NotIn", "values": ["d"]}]}]}}}}, None, ["d/V100", "d/unlisted-model", "d/no-model", "e/V100", "e/unlisted-model", "e/no-model"]),
        ({"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{}]}}}}, "three", ["d/V100", "d/unlisted-model", "d/no-model"]),
        ({"tolerations": [{"key": "shared", "operator": "Exists"}]}, None, ["c/L40S", "c/unlisted-model", "c/no-model", "d/V100", "d/unlisted-model", "d/no-model", "e/V100", "e/unlisted-model", "e/no-model"]),
        ({"tolerations": [{"key": "gpu-pool", "operator": "Equal", "value": "x"}]}, None, ["d/V100", "d/unlisted-model", "d/no-model", "e/V100", "e/unlisted-model", "e/no-model", "/unknown-pool", "/unknown-pool"]),
        ({"tolerations": [{"operator": "Exists"}]}, None, ["a/A100", "a/V100", "a/unlisted-model", "a/no-model", "b/A100", "b/unlisted-model", "b/no-model", "c/L40S", "c/unlisted-model", "c/no-model", "d/V100", "d/unlisted-model", "d/no-model", "e/V100", "e/unlisted-model", "e/no-model", "/unknown-pool", "/unknown-pool"]),
    ],
)  # fmt: skip
def test_an_affinity_in_a_pool_or_the_taints_tolerated_narrow_the_kinds(
    spec: dict[str, Any], workload: str | None, expected: list[str]
) -> None:
    assert kinds_of(POLICIES["mixed taints"], spec, workload) == expected
