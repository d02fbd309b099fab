"""The comparison of the engine's decisions with another commit's (benchmarks/engine/same_decisions.py)."""

from __future__ import annotations

import pickle

from benchmarks.engine import same_decisions


def test_the_cases_hold_each_pod_under_each_policy_and_inventory_in_turn() -> None:
    drawn = same_decisions.cases(24)
    cases = drawn["cases"]
    assert len(cases) % 4 == 0
    quarter = len(cases) // 4
    assert [c["inventory"] for c in cases[::quarter]] == [None, None, "live", "live"]
    assert [c["policy"] for c in cases[::quarter]] == ["default", "bench", "default", "bench"]
    pickle.loads(pickle.dumps(drawn))  # what the replaying process reads


def test_crossed_pods_differ_from_a_drawn_one_in_one_field() -> None:
    pods = same_decisions.pods(24)
    crossed = same_decisions.crossed(pods, 12)
    assert len(crossed) == 12
    assert all(isinstance(pod.get("spec"), dict) for pod in crossed)


def test_the_engine_decides_as_the_committed_engine_does() -> None:
    assert same_decisions.main(["--count", "40", "--against", "HEAD"]) == 0
