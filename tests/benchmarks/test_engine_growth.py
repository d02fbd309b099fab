"""The pure helpers of `benchmarks.engine.growth`: the generated policies, the pods of
several containers, and the growth factors. Nothing here times anything."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from benchmarks.engine.growth import (
    GrowthCase,
    GrowthRow,
    GrowthSamples,
    case_name,
    class_pod,
    growth_case,
    growth_policy,
    growth_policy_text,
    growth_rows,
    growth_sentences,
    growth_table,
    last_class,
    ratio,
    spread_gpus,
)
from webhook.engine import Engine
from webhook.policy import load_default_policy, load_policy_text


@pytest.mark.parametrize("size", [1, 2, 20, 200])
def test_generated_policy_has_the_asked_number_of_pools_and_classes(size: int) -> None:
    policy = growth_policy(size)
    Engine(policy)  # the engine accepts it, as `serve` would
    assert len(policy.pools) == size
    assert len(policy.classes) == size
    listed = [kind for kind in policy.node_kinds if kind.listed]
    assert len(listed) == 2 * size  # two models per pool
    assert len(policy.governed_priority_classes) == size
    assert len({p.label_value for p in policy.pools.values()}) == size


def test_each_generated_class_has_its_own_pool_taints_and_priority() -> None:
    policy = growth_policy(20)
    for index, (name, workload) in enumerate(policy.classes.items()):
        assert workload.pools == (f"pool-{index:03d}",)
        assert workload.pool_label_values == (f"gpu-pool-{index:03d}",)
        assert workload.priority_class.name == f"{name}-priority"
        assert workload.priority_class.value == 1000 + index
        assert workload.co_location is not None
        keys = {(t.key, t.value) for t in workload.taints}
        assert ("gpu-admission.io/pool", f"gpu-pool-{index:03d}") in keys
        assert ("nvidia.com/gpu", "present") in keys
    mig = [p.mig_strategy for p in policy.pools.values()]
    assert mig.count("mixed") == mig.count("none") == 10
    assert policy.pool_label == "gpu-admission.io/pool"
    assert policy.model_label == "nvidia.com/gpu.product"


def test_generated_policy_text_round_trips_through_the_loader() -> None:
    text = growth_policy_text(3)
    assert load_policy_text(text, "test").classes.keys() == {
        "class-000",
        "class-001",
        "class-002",
    }


def test_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        growth_policy_text(0)
    with pytest.raises(ValueError):
        spread_gpus(8, 0)


@pytest.mark.parametrize(
    ("total", "containers", "expected"),
    [
        (8, 1, [8]),
        (8, 3, [3, 3, 2]),
        (8, 8, [1] * 8),
        (8, 10, [1, 1, 1, 1, 0, 1, 1, 1, 1, 0]),
    ],
)
def test_spread_gpus(total: int, containers: int, expected: list[int]) -> None:
    assert spread_gpus(total, containers) == expected


@pytest.mark.parametrize("containers", [1, 10, 100, 1000])
def test_spread_gpus_keeps_the_total(containers: int) -> None:
    spread = spread_gpus(8, containers)
    assert len(spread) == containers
    assert sum(spread) == 8
    assert max(spread) - min(spread) <= (1 if containers >= 8 else 8)


@pytest.mark.parametrize("containers", [1, 10, 100])
def test_class_pod_is_mutated_then_admitted(containers: int) -> None:
    pod = class_pod(containers)
    assert len(pod["spec"]["containers"]) == containers
    gpus = sum(
        int(c["resources"]["limits"].get("nvidia.com/gpu", 0)) for c in pod["spec"]["containers"]
    )
    assert gpus == 8
    case = growth_case("containers", containers, Engine(load_default_policy()), pod)
    assert case.name == case_name("containers", containers)
    assert case.body_bytes > 0


def test_class_pod_of_the_last_generated_class_is_admitted() -> None:
    engine = Engine(growth_policy(20))
    assert last_class(engine.policy) == "class-019"
    case = growth_case("pools", 20, engine, class_pod(1, "class-019"))
    assert case.name == "20 pools"


def test_case_names() -> None:
    assert case_name("containers", 1) == "1 container"
    assert case_name("containers", 100) == "100 containers"
    assert case_name("pools", 2) == "2 pools"


def _rows() -> list[GrowthRow]:
    """Rows of made-up timings: only the axis and size of a case count here."""
    points = [("containers", 1), ("containers", 100), ("pools", 2), ("pools", 20)]
    cases = [cast(GrowthCase, SimpleNamespace(axis=a, size=n)) for a, n in points]
    samples = [
        GrowthSamples([1_000] * 4, [2_000] * 4),
        GrowthSamples([61_000] * 4, [40_000, 40_000, 40_000, 80_000]),
        GrowthSamples([1_000] * 4, [1_000] * 4),
        GrowthSamples([1_000] * 4, [3_000] * 4),
    ]
    return growth_rows(cases, samples)


def test_growth_rows_compare_with_the_smallest_case_of_their_axis() -> None:
    rows = _rows()
    assert [(r.case, r.call) for r in rows] == [
        ("1 container", "mutate"),
        ("1 container", "validate"),
        ("100 containers", "mutate"),
        ("100 containers", "validate"),
        ("2 pools", "mutate"),
        ("2 pools", "validate"),
        ("20 pools", "mutate"),
        ("20 pools", "validate"),
    ]
    factors = {(r.case, r.call): (r.size_factor, r.p50_factor, r.mean_factor) for r in rows}
    assert factors["1 container", "mutate"] == (1, 1, 1)
    assert factors["100 containers", "mutate"] == (100, 61, 61)
    assert factors["100 containers", "validate"] == (100, 20, 25)
    assert factors["20 pools", "validate"] == (10, 3, 3)
    mutate_100 = rows[2].summary
    assert mutate_100.count == 4
    assert mutate_100.p50 == 61.0  # microseconds
    assert mutate_100.per_second == pytest.approx(1e9 / 61_000)


def test_growth_sentences_name_each_larger_case() -> None:
    assert growth_sentences(_rows()) == [
        "100 containers: mutate 61.0x, validate 20.0x the time of 1 container (p50), "
        "for 100x the size",
        "20 pools: mutate 1.0x, validate 3.0x the time of 2 pools (p50), for 10x the size",
    ]


def test_growth_table_has_a_line_per_row() -> None:
    table = growth_table(_rows()).splitlines()
    assert len(table) == 2 + 8
    assert "| 100 containers | mutate" in table[4]
    assert table[4].rstrip().endswith("61.0 |")


def test_ratio_of_nothing_is_zero() -> None:
    assert ratio(5.0, 0.0) == 0.0
    assert ratio(6.0, 2.0) == 3.0
