"""The pure helpers of `benchmarks.service`: the review bodies, the load generator's
command line and JSON report, the choice of cores, summaries and the table. Nothing
here starts a server or times anything."""

from __future__ import annotations

import argparse
import base64
import dataclasses
import math
from pathlib import Path

import orjson
import pytest

from benchmarks.common.stub_webhook import reply_parts
from benchmarks.service.bodies import (
    MUTATE_UID,
    VALIDATE_UID,
    deployment_pod,
    expected_markers,
    mutate_body,
    patch_of,
    validate_body,
)
from benchmarks.service.load_generator import LoadResult, loadgen_command, parse_result
from benchmarks.service.report import (
    FLOOR,
    OURS,
    SATURATION,
    Run,
    per_pod_cpu,
    ratio,
    results_table,
    summarize,
)
from benchmarks.service.run import choose_cores, planned_seconds
from webhook.engine import Engine
from webhook.http.review import parse_review, to_engine_request

# ------------------------------------------------------------------ bodies


def test_the_mutate_body_is_a_pod_create_of_about_three_and_a_half_kb() -> None:
    body = mutate_body()
    review = orjson.loads(body)
    request = review["request"]
    assert review["kind"] == "AdmissionReview"
    assert request["uid"] == MUTATE_UID
    assert (request["operation"], request["kind"]["kind"], request["namespace"]) == (
        "CREATE",
        "Pod",
        "ml",
    )
    assert request["object"] == deployment_pod()
    assert request["userInfo"]["username"].endswith(":replicaset-controller")
    assert 3_000 <= len(body) <= 4_000


def test_the_pod_is_of_a_class_and_asks_for_a_gpu() -> None:
    pod = deployment_pod()
    assert pod["metadata"]["labels"]["gpu-admission.io/workload"] == "inference"
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"
    assert deployment_pod("training")["metadata"]["labels"]["gpu-admission.io/workload"] == (
        "training"
    )


def _reply(response: dict[str, object]) -> bytes:
    return orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    )


def test_patch_of_decodes_a_json_patch_reply() -> None:
    patch = [{"op": "add", "path": "/spec/priorityClassName", "value": "inference-priority"}]
    encoded = base64.b64encode(orjson.dumps(patch)).decode()
    reply = _reply({"uid": "u", "allowed": True, "patchType": "JSONPatch", "patch": encoded})
    assert patch_of(reply) == patch
    assert patch_of(_reply({"uid": "u", "allowed": True})) == []


def test_patch_of_refuses_a_denial_or_another_patch_type() -> None:
    with pytest.raises(ValueError, match="not allowed"):
        patch_of(_reply({"uid": "u", "allowed": False, "status": {"code": 403}}))
    with pytest.raises(ValueError, match="patchType"):
        patch_of(_reply({"uid": "u", "allowed": True, "patchType": "Other", "patch": "W10="}))


def test_the_validate_body_holds_the_pod_with_the_patch_applied() -> None:
    patch = [
        {"op": "add", "path": "/spec/priorityClassName", "value": "inference-priority"},
        {"op": "replace", "path": "/spec/priority", "value": 1000000},
    ]
    request = orjson.loads(validate_body(patch))["request"]
    assert request["uid"] == VALIDATE_UID
    pod = request["object"]
    assert pod["spec"]["priorityClassName"] == "inference-priority"
    assert pod["spec"]["priority"] == 1000000
    assert deployment_pod()["spec"]["priority"] == 0, "the pod as created is left alone"


def test_our_engine_mutates_the_pod_and_admits_it_mutated(engine: Engine) -> None:
    """The bodies the benchmark posts get the answers it expects from ours."""
    mutation = engine.mutate(to_engine_request(parse_review(mutate_body())))
    assert mutation.allowed and mutation.patch
    mutated = validate_body(list(mutation.patch))
    validation = engine.validate(to_engine_request(parse_review(mutated)))
    assert validation.allowed, validation.message


@pytest.mark.parametrize("uid", [MUTATE_UID, VALIDATE_UID])
def test_the_markers_are_found_in_compact_replies(uid: str) -> None:
    reply = _reply({"uid": uid, "allowed": True})
    assert all(marker.encode() in reply for marker in expected_markers(uid))
    other = _reply({"uid": "someone-else", "allowed": True})
    assert not all(marker.encode() in other for marker in expected_markers(uid))
    denied = _reply({"uid": uid, "allowed": False})
    assert not all(marker.encode() in denied for marker in expected_markers(uid))
    assert not all(marker.encode() in reply for marker in expected_markers(uid, patched=True))
    patched = _reply({"uid": uid, "allowed": True, "patchType": "JSONPatch", "patch": "W10="})
    assert all(marker.encode() in patched for marker in expected_markers(uid, patched=True))


def test_the_markers_are_found_in_the_floors_replies() -> None:
    prefix, suffix = reply_parts(None)
    for uid in (MUTATE_UID, VALIDATE_UID):
        reply = prefix + orjson.dumps(uid) + suffix
        assert all(marker.encode() in reply for marker in expected_markers(uid))


# ------------------------------------------------------------------ the load generator


REPORT = {
    "mode": "open",
    "url": "https://127.0.0.1:8443/mutate?timeout=10s",
    "connections": 16,
    "rate": 500.0,
    "body_bytes": 3425,
    "scheduled": 5000,
    "count": 4990,
    "errors": 10,
    "dropped": 0,
    "error_sample": ["status 500: boom"],
    "duration": 10.02,
    "throughput": 498.0,
    "latency_ms": {"p50": 1.5, "p90": 2.5, "p99": 4.0, "p99.9": 9.0, "max": 12.0, "mean": 1.7},
    "protocols": {"HTTP/1.1": 4990},
    "cpu_seconds": 1.25,
    "gomaxprocs": 1,
}


def test_the_report_is_parsed_from_the_last_line() -> None:
    result = parse_result(b"ready\ndone\n" + orjson.dumps(REPORT) + b"\n")
    assert result.mode == "open"
    assert (result.count, result.errors, result.dropped, result.scheduled) == (4990, 10, 0, 5000)
    assert result.latency_ms["p99.9"] == 9.0
    assert result.protocols == {"HTTP/1.1": 4990}
    assert result.cpu_seconds == 1.25
    assert result.error_sample == ["status 500: boom"]
    assert not result.ok


def test_a_report_without_percentiles_or_nothing_at_all_is_refused() -> None:
    broken = {**REPORT, "latency_ms": {"p50": 1.0}}
    with pytest.raises(ValueError, match="p90"):
        parse_result(orjson.dumps(broken))
    with pytest.raises(ValueError, match="nothing"):
        parse_result("\n")
    empty = {**REPORT, "count": 0, "errors": 3, "latency_ms": {}}
    assert parse_result(orjson.dumps(empty)).count == 0


def test_the_command_line_of_a_closed_and_an_open_loop() -> None:
    closed = loadgen_command(
        Path("/bin/loadgen"),
        "https://h/mutate",
        Path("b.json"),
        Path("ca.crt"),
        connections=16,
        seconds=10,
        warmup=1,
        expect=['"uid":"u"', '"allowed":true'],
    )
    assert closed[:7] == [
        "/bin/loadgen",
        "-url",
        "https://h/mutate",
        "-body",
        "b.json",
        "-ca",
        "ca.crt",
    ]
    assert "-rate" not in closed
    assert closed[closed.index("-c") + 1] == "16"
    assert closed[closed.index("-duration") + 1] == "10s"
    assert [closed[i + 1] for i, a in enumerate(closed) if a == "-expect"] == [
        '"uid":"u"',
        '"allowed":true',
    ]
    opened = loadgen_command(
        Path("lg"), "u", Path("b"), Path("c"), connections=4, seconds=2.5, warmup=0, rate=812.345
    )
    assert opened[opened.index("-rate") + 1] == "812.345"
    assert opened[opened.index("-duration") + 1] == "2.5s"


# ------------------------------------------------------------------ cores and plan


def test_the_servers_get_the_last_core_and_the_load_generator_the_rest() -> None:
    assert choose_cores({0, 1}, None) == (1, {0})
    assert choose_cores({0, 1, 2, 3}, 0) == (0, {1, 2, 3})
    assert choose_cores({3}, None) == (3, {3}), "one core: shared"
    with pytest.raises(ValueError, match="not among"):
        choose_cores({0, 1}, 5)


def test_the_planned_time_counts_every_run_and_its_warm_up() -> None:
    args = argparse.Namespace(rounds=3, seconds=10.0, warmup=1.0)
    # 3 rounds x 2 servers x 2 routes x (saturation, 50%, 90%) x 11 s
    assert planned_seconds(args) == 3 * 2 * 2 * 3 * 11


# ------------------------------------------------------------------ summaries and table


def _result(throughput: float, p99: float, count: int = 1000, rate: float = 0.0) -> LoadResult:
    return LoadResult(
        mode="open" if rate else "closed",
        rate=rate,
        connections=16,
        body_bytes=3425,
        scheduled=count,
        count=count,
        errors=0,
        dropped=0,
        duration=count / throughput,
        throughput=throughput,
        latency_ms={"p50": p99 / 4, "p90": p99 / 2, "p99": p99, "p99.9": p99 * 2, "max": p99 * 3},
        protocols={"HTTP/1.1": count},
        cpu_seconds=0.1,
    )


def _runs() -> list[Run]:
    runs = []
    for round_index, (ours, floor) in enumerate(
        [(500.0, 2000.0), (520.0, 2100.0), (480.0, 1900.0)]
    ):
        for route in ("/mutate", "/validate"):
            runs.append(Run(OURS, route, SATURATION, round_index, _result(ours, 8.0), 1.0))
            runs.append(Run(FLOOR, route, SATURATION, round_index, _result(floor, 2.0), 0.25))
            runs.append(
                Run(OURS, route, "50%", round_index, _result(ours / 2, 4.0, rate=ours / 2), 1.2)
            )
            runs.append(
                Run(FLOOR, route, "50%", round_index, _result(floor / 2, 1.0, rate=floor / 2), 0.3)
            )
    return runs


def test_summaries_take_medians_over_rounds() -> None:
    summaries = summarize(_runs())
    ours = next(
        s for s in summaries if (s.server, s.route, s.load) == (OURS, "/mutate", SATURATION)
    )
    assert ours.rounds == 3
    assert ours.throughput == 500.0
    assert (ours.throughput_min, ours.throughput_max) == (480.0, 520.0)
    assert ours.reviews == 3000
    assert ours.cpu_us_per_review == pytest.approx(1000.0)
    assert ours.latency_ms["p99"] == 8.0
    assert ours.client_cpu_share == pytest.approx(0.05)
    order = [(s.route, s.load, s.server) for s in summaries]
    assert order[:4] == [
        ("/mutate", SATURATION, OURS),
        ("/mutate", SATURATION, FLOOR),
        ("/mutate", "50%", OURS),
        ("/mutate", "50%", FLOOR),
    ]


def test_cpu_per_review_counts_errors_as_answered() -> None:
    result = _result(100.0, 1.0, count=90)
    failed = LoadResult(**{**result.__dict__, "errors": 10})
    assert Run(OURS, "/mutate", SATURATION, 0, failed, 0.5).cpu_us_per_review == 5000.0
    empty = LoadResult(**{**result.__dict__, "count": 0})
    assert Run(OURS, "/mutate", SATURATION, 0, empty, 0.5).cpu_us_per_review is None


def test_the_table_has_a_row_per_server_and_a_ratio_row() -> None:
    table = results_table(summarize(_runs()), connections=16)
    lines = table.splitlines()
    assert lines[0].startswith("| route, load")
    assert "CPU µs/review" in lines[0] and "p99.9 ms" in lines[0]
    assert len(lines) == 2 + 2 * 2 * 3  # header, rule; 2 routes x 2 loads x (ours, floor, ratio)
    ratios = [line for line in lines if "ours / floor" in line]
    assert len(ratios) == 4
    cells = [cell.strip() for cell in ratios[0].strip("|").split("|")]
    # saturation: 500 / 2,000 reviews/s, 1,000 / 250 µs, p99 8 / 2 ms
    assert cells[2:7] == ["0.25x", "4.00x", "4.00x", "4.00x", "4.00x"]
    assert "/mutate saturation (16 conn.)" in table
    assert "/mutate 50% (250/s)" in table and "/mutate 50% (1,000/s)" in table
    assert "500 (480 to 520)" in table
    assert lines[0].rstrip().endswith("errors / dropped |")
    assert lines[2].rstrip().endswith("0 / 0 |")


def test_small_ratios_keep_two_significant_digits() -> None:
    runs = [r for r in _runs() if r.load == SATURATION and r.route == "/mutate"]
    slow = [
        dataclasses.replace(r, result=_result(5.0, 8.0)) if r.server == OURS else r for r in runs
    ]
    table = results_table(summarize(slow), connections=16)
    assert "0.0025x" in table


def test_per_pod_cpu_adds_the_two_routes_at_saturation() -> None:
    per_pod = per_pod_cpu(summarize(_runs()))
    assert per_pod[OURS] == pytest.approx(2000.0)
    assert per_pod[FLOOR] == pytest.approx(500.0)
    only_mutate = [r for r in _runs() if r.route == "/mutate"]
    assert per_pod_cpu(summarize(only_mutate)) == {}


def test_ratio_is_none_without_both_figures() -> None:
    assert ratio(2.0, 4.0) == 0.5
    assert ratio(None, 4.0) is None
    assert ratio(2.0, 0.0) is None
    assert ratio(2.0, None) is None
    assert not math.isnan(ratio(1.0, 3.0) or math.nan)
