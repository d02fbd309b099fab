"""The pure helpers of `benchmarks.soak`: the mix and its expected replies, reply checks,
/proc parsing, growth and the verdict. Nothing here starts a server or times anything."""

from __future__ import annotations

import os
from array import array
from collections import Counter

import orjson
import pytest

from benchmarks.soak.client import ClientReport, check_reply, phase_seconds, split
from benchmarks.soak.payloads import (
    UID_PLACEHOLDER,
    Payload,
    payloads,
    request_uid,
    schedule,
    with_uid,
)
from benchmarks.soak.proc import (
    ProcessFigures,
    Sample,
    changes,
    cpu_share,
    growth_percent,
    judge,
    parse_cpu_ticks,
    parse_smaps_rollup,
    parse_threads,
    read_tree,
    sample_table,
)
from benchmarks.soak.run import kinds_table, milestones, percentile
from webhook.http.app import INLINE_BODY_BYTES

SMAPS_ROLLUP = """\
55f84ab27000-7ffe62778000 ---p 00000000 00:00 0                          [rollup]
Rss:              137216 kB
Pss:               91136 kB
Pss_Dirty:         80000 kB
Pss_Anon:          79000 kB
Shared_Clean:      40000 kB
"""

STATUS = "Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\nThreads:\t8\n"

STAT = (
    "4242 (python -m (odd) name) S 1 4242 4242 0 -1 4194560 25000 0 0 0 "
    "1500 250 0 0 20 0 8 0 12345 900000000 33000 18446744073709551615"
)


def figures(pid: int, pss_kib: int, fds: int = 20, threads: int = 8) -> ProcessFigures:
    return ProcessFigures(pid, pss_kib + 40_000, pss_kib, fds, threads, 100)


def tree(label: str, server_pss: int, worker_pss: int, **server: int) -> Sample:
    return Sample(label, 0, 0.0, (figures(1, server_pss, **server), figures(2, worker_pss, fds=6)))


# ------------------------------------------------------------------ /proc


def test_parse_smaps_rollup() -> None:
    assert parse_smaps_rollup(SMAPS_ROLLUP) == (137_216, 91_136)


def test_parse_threads() -> None:
    assert parse_threads(STATUS) == 8
    with pytest.raises(ValueError):
        parse_threads("Name:\tpython\n")


def test_parse_cpu_ticks_reads_past_a_command_with_parentheses() -> None:
    assert parse_cpu_ticks(STAT) == 1500 + 250


def test_read_tree_of_this_process() -> None:
    found = read_tree(os.getpid())
    assert found[0].pid == os.getpid()
    assert found[0].rss_kib > 0 and found[0].pss_kib > 0
    assert found[0].fds >= 3 and found[0].threads >= 1


# ------------------------------------------------------------------ growth


def test_growth_percent() -> None:
    assert growth_percent(100.0, 109.0) == pytest.approx(9.0)
    assert growth_percent(100.0, 95.0) == pytest.approx(-5.0)
    with pytest.raises(ValueError):
        growth_percent(0.0, 1.0)


def test_sample_sums_the_tree_and_keeps_the_server_apart() -> None:
    sample = tree("end", 50 * 1024, 30 * 1024, fds=27, threads=8)
    assert sample.pss_mib == 80.0
    assert sample.rss_mib == pytest.approx(80.0 + 2 * 40_000 / 1024)
    assert sample.server_pss_mib == 50.0
    assert (sample.server_fds, sample.fds) == (27, 33)
    assert (sample.server_threads, sample.threads) == (8, 16)


def test_judge_passes_small_growth_and_no_more_descriptors_or_threads() -> None:
    verdict = judge(tree("warm", 50 * 1024, 30 * 1024), tree("end", 52 * 1024, 31 * 1024))
    assert verdict.pss_percent == pytest.approx(3.75)
    assert verdict.memory_ok and verdict.ok
    assert verdict.sentences()[-1] == "verdict: PASS"


def test_judge_fails_memory_growth_of_ten_percent() -> None:
    verdict = judge(tree("warm", 50 * 1024, 30 * 1024), tree("end", 58 * 1024, 30 * 1024))
    assert verdict.pss_percent == pytest.approx(10.0)
    assert not verdict.memory_ok and not verdict.ok
    assert "NOT under 10%" in verdict.sentences()[0]


@pytest.mark.parametrize(
    "server",
    [{"fds": 21}, {"threads": 9}],
)
def test_judge_fails_one_more_descriptor_or_thread(server: dict[str, int]) -> None:
    verdict = judge(tree("warm", 50 * 1024, 30 * 1024), tree("end", 50 * 1024, 30 * 1024, **server))
    assert verdict.memory_ok and not verdict.ok
    assert verdict.sentences()[-1] == "verdict: FAIL"


def test_judge_fails_a_new_process() -> None:
    baseline = tree("warm", 50 * 1024, 30 * 1024)
    end = Sample("end", 0, 0.0, (*baseline.processes, figures(3, 1)))
    verdict = judge(baseline, end)
    assert verdict.processes == 1 and not verdict.ok


def test_changes_name_the_process_that_changed() -> None:
    baseline = tree("warm", 50 * 1024, 30 * 1024)
    assert changes(baseline, baseline) == []
    end = tree("end", 50 * 1024, 30 * 1024, threads=9)
    assert changes(baseline, end) == ["server 1: fds 20 -> 20, threads 8 -> 9"]
    swapped = Sample("end", 0, 0.0, (baseline.processes[0], figures(3, 1)))
    assert changes(baseline, swapped) == ["child 2: gone", "child 3: new (8 threads)"]


def test_cpu_share() -> None:
    first = Sample("a", 0, 10.0, (ProcessFigures(1, 1, 1, 1, 1, 0),))
    ticks = os.sysconf("SC_CLK_TCK")
    second = Sample("b", 0, 20.0, (ProcessFigures(1, 1, 1, 1, 1, 5 * ticks),))
    assert cpu_share(first, second) == pytest.approx(0.5)
    assert cpu_share(first, first) == 0.0


def test_sample_table_shows_growth_against_the_baseline() -> None:
    baseline = tree("after warm-up", 50 * 1024, 30 * 1024)
    end = tree("end", 52 * 1024, 32 * 1024)
    lines = sample_table([baseline, end], baseline).splitlines()
    assert len(lines) == 4
    assert "+0.0%" in lines[2]
    assert "+5.0%" in lines[3]
    assert [c.strip() for c in lines[3].split("|")][8:10] == ["20/26", "8/16"]


# ------------------------------------------------------------------ the mix


@pytest.fixture(scope="module")
def mix() -> list[Payload]:
    return payloads()


def test_mix_has_every_kind_of_request(mix: list[Payload]) -> None:
    assert sum(p.weight for p in mix) == 100
    paths = Counter(p.path.split("?")[0] for p in mix)
    assert set(paths) == {"/mutate", "/validate"}
    assert any(p.allowed is False and p.status == 200 for p in mix)  # a denial
    assert any(p.status == 400 for p in mix)  # bodies the edge refuses
    assert any("malformed" in p.name and p.allowed is False for p in mix)
    assert any("without class" in p.name for p in mix)
    large = [p for p in mix if len(p.body) > INLINE_BODY_BYTES]
    assert large and all(p.allowed for p in large)  # judged by the review worker
    assert all(len(p.body) <= INLINE_BODY_BYTES for p in mix if p not in large)


def test_every_review_carries_the_uid_placeholder_once(mix: list[Payload]) -> None:
    for payload in mix:
        if payload.is_review:
            assert payload.body.count(UID_PLACEHOLDER.encode()) == 1, payload.name
            review = orjson.loads(payload.body)
            assert review["request"]["uid"] == UID_PLACEHOLDER


def test_expected_decisions(mix: list[Payload]) -> None:
    by_name = {p.name: p for p in mix}
    assert by_name["validate: denied pod"].allowed is False
    assert by_name["mutate: malformed pod"].allowed is False
    assert by_name["validate: inference pod, mutated"].allowed is True
    assert by_name["mutate: body not JSON"].status == 400


def test_request_uids_are_unique_and_shaped_like_uuids() -> None:
    uids = {request_uid(client, number) for client in range(4) for number in range(1000)}
    assert len(uids) == 4000
    assert all(len(uid) == len(UID_PLACEHOLDER) for uid in uids)
    assert with_uid(b'{"uid":"%s"}' % UID_PLACEHOLDER.encode(), "x") == b'{"uid":"x"}'
    assert with_uid(b"not json", "x") == b"not json"


def test_schedule_spreads_each_kind_by_its_weight() -> None:
    order = schedule([3, 1, 1])
    assert Counter(order) == {0: 3, 1: 1, 2: 1}
    assert order[0] == 0 and order[:2] != [0, 0]
    assert schedule([1]) == [0]


def test_phase_seconds_spans_every_client() -> None:
    first = ClientReport(0, [], [], [], phases={"warm-up": (10.0, 12.0), "measured": (13.0, 40.0)})
    second = ClientReport(1, [], [], [], phases={"warm-up": (10.5, 12.5), "measured": (13.0, 41.5)})
    assert phase_seconds([first, second], "measured") == 28.5
    assert phase_seconds([first, second], "warm-up") == 2.5
    assert phase_seconds([], "measured") == 0.0


def test_split() -> None:
    assert split(10, 4) == [3, 3, 2, 2]
    assert sum(split(1_000_000, 3)) == 1_000_000


def test_milestones_fall_after_the_warm_up() -> None:
    assert milestones(10_000, 1_000_000, 10) == [10_000 + 100_000 * i for i in range(1, 10)]
    assert milestones(100, 20, 1) == []
    assert milestones(100, 20, 0) == []


# ------------------------------------------------------------------ replies


def reply(uid: str, allowed: bool) -> bytes:
    response = {"uid": uid, "allowed": allowed}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "response": response})


def test_check_reply() -> None:
    review = Payload("r", "/mutate", b"", 200, True, 1)
    assert check_reply(review, "u1", 200, reply("u1", True)) == ""
    assert "uid" in check_reply(review, "u1", 200, reply("u2", True))
    assert "allowed False" in check_reply(review, "u1", 200, reply("u1", False))
    assert "status 500" in check_reply(review, "u1", 500, b"oops")
    assert "not an AdmissionReview" in check_reply(review, "u1", 200, b"[]")
    assert "not an AdmissionReview" in check_reply(review, "u1", 200, b"{")
    refused = Payload("bad", "/mutate", b"{", 400, None, 1)
    assert check_reply(refused, "u1", 400, b'{"error":"body is not JSON"}') == ""
    assert "status 200" in check_reply(refused, "u1", 200, reply("u1", True))


def test_percentile_and_kinds_table() -> None:
    assert percentile([1000, 2000, 3000, 4000], 0.5) == 3.0
    assert percentile([], 0.99) == 0.0
    mix = [Payload("a", "/mutate", b"", 200, True, 2), Payload("b", "/validate", b"", 400, None, 1)]
    reports = [
        ClientReport(0, [2, 1], [0, 1], [array("I", [1000, 3000]), array("I", [500])]),
        ClientReport(1, [2, 0], [0, 0], [array("I", [2000, 2000]), array("I")]),
    ]
    lines = kinds_table(mix, reports).splitlines()
    assert len(lines) == 4
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines[2:]]
    assert cells[0] == ["a", "200", "true", "4", "0", "2.00", "3.00", "3.00"]
    assert cells[1] == ["b", "400", "", "1", "1", "0.50", "0.50", "0.50"]
