"""The pure helpers of `benchmarks.apiserver`: arm order, /proc and /metrics parsing,
summaries and tables, the CEL literals and the stub's replies. Nothing here starts a
cluster or times anything."""

from __future__ import annotations

import base64
import math

import orjson
import pytest

from benchmarks.apiserver.cel import cel_literal, cel_string, json_patch, policy_objects
from benchmarks.apiserver.load import benchmark_pod, pod_bodies
from benchmarks.apiserver.metrics import (
    WEBHOOK_FAMILY,
    Totals,
    admission_delta,
    admission_metrics,
    histogram_totals,
)
from benchmarks.apiserver.profile import (
    FAMILIES,
    OTHER,
    Capture,
    Trace,
    family_of,
    family_seconds,
    parse_duration,
    parse_traces,
    per_pod,
    profile_report,
    profile_table,
)
from benchmarks.apiserver.report import Sample, summarize, throughput_table
from benchmarks.common.processes import parse_stat, tree, tree_ticks
from benchmarks.common.report import cpu_model, markdown_table, number, percentile, rotated, stdev
from benchmarks.common.stub_webhook import reply_parts
from webhook.policy import load_default_policy

ARMS = ["none", "ours", "allow-python", "allow-go", "patch-floor", "cel"]


# ------------------------------------------------------------------ arm order


def test_rotation_starts_each_round_one_arm_later() -> None:
    assert rotated(ARMS, 0) == ARMS
    assert rotated(ARMS, 1) == [*ARMS[1:], ARMS[0]]
    assert rotated(ARMS, len(ARMS)) == ARMS
    assert rotated([], 3) == []


def test_rotation_puts_every_arm_in_every_position_once_per_cycle() -> None:
    orders = [rotated(ARMS, r) for r in range(len(ARMS))]
    for position in range(len(ARMS)):
        assert sorted(order[position] for order in orders) == sorted(ARMS)
    for order in orders:
        assert sorted(order) == sorted(ARMS)


# ------------------------------------------------------------------ /proc


STAT = (
    "4242 (python3 (x) y) S 17 4242 4242 0 -1 4194304 5000 300 0 0 "
    "250 40 7 3 20 0 5 0 12345 1000000 2000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 "
    "0 17 1 0 0 0 0 0"
)


def test_stat_fields_are_counted_after_the_last_parenthesis() -> None:
    stat = parse_stat(STAT)
    assert (stat.pid, stat.ppid) == (4242, 17)
    assert (stat.utime, stat.stime, stat.cutime, stat.cstime) == (250, 40, 7, 3)
    assert stat.ticks == 300


def _stat(pid: int, ppid: int, utime: int, cutime: int = 0) -> str:
    return f"{pid} (p) S {ppid} 0 0 0 0 0 0 0 0 0 {utime} 0 {cutime} 0 20 0 1 0"


def test_a_tree_sums_its_descendants_and_what_they_waited_for() -> None:
    stats = [
        parse_stat(_stat(10, 1, 100, cutime=5)),  # the server, one child reaped
        parse_stat(_stat(11, 10, 30)),  # its worker
        parse_stat(_stat(12, 11, 2)),  # the worker's child
        parse_stat(_stat(20, 1, 999)),  # somebody else
    ]
    assert sorted(s.pid for s in tree(10, stats)) == [10, 11, 12]
    assert tree_ticks(10, stats) == 100 + 5 + 30 + 2
    assert tree_ticks(99, stats) == 0


# ------------------------------------------------------------------ /metrics

METRICS_BEFORE = f"""\
# HELP {WEBHOOK_FAMILY} Admission webhook latency
# TYPE {WEBHOOK_FAMILY} histogram
{WEBHOOK_FAMILY}_bucket{{name="mutate.gpu-admission.io",operation="CREATE",rejected="false",type="admit",le="0.005"}} 3
{WEBHOOK_FAMILY}_sum{{name="mutate.gpu-admission.io",operation="CREATE",rejected="false",type="admit"}} 0.5
{WEBHOOK_FAMILY}_count{{name="mutate.gpu-admission.io",operation="CREATE",rejected="false",type="admit"}} 10
{WEBHOOK_FAMILY}_sum{{name="validate.gpu-admission.io",operation="CREATE",rejected="true",type="validating"}} 0.2
{WEBHOOK_FAMILY}_count{{name="validate.gpu-admission.io",operation="CREATE",rejected="true",type="validating"}} 4
apiserver_admission_controller_admission_duration_seconds_sum{{name="MutatingAdmissionPolicy",operation="CREATE",rejected="false",type="admit"}} 1.0
apiserver_admission_controller_admission_duration_seconds_count{{name="MutatingAdmissionPolicy",operation="CREATE",rejected="false",type="admit"}} 100
apiserver_admission_controller_admission_duration_seconds_sum{{name="Priority",operation="CREATE",rejected="false",type="admit"}} 9
apiserver_admission_controller_admission_duration_seconds_count{{name="Priority",operation="CREATE",rejected="false",type="admit"}} 9
"""

METRICS_AFTER = METRICS_BEFORE.replace("} 0.5\n", "} 1.5\n").replace("} 10\n", "} 60\n") + (
    f'{WEBHOOK_FAMILY}_sum{{name="validate.gpu-admission.io",operation="CREATE",'
    'rejected="false",type="validating"} 2.0\n'
    f'{WEBHOOK_FAMILY}_count{{name="validate.gpu-admission.io",operation="CREATE",'
    'rejected="false",type="validating"} 50\n'
)


def test_histogram_totals_sum_over_the_other_labels() -> None:
    totals = histogram_totals(METRICS_AFTER, WEBHOOK_FAMILY)
    assert totals["mutate.gpu-admission.io"] == Totals(1.5, 60)
    assert totals["validate.gpu-admission.io"] == Totals(2.2, 54)


def test_admission_delta_is_what_was_observed_in_between() -> None:
    before, after = admission_metrics(METRICS_BEFORE), admission_metrics(METRICS_AFTER)
    assert set(before.plugins) == {"MutatingAdmissionPolicy"}  # only the four plugins kept
    moved = admission_delta(after, before)
    assert moved.webhooks["mutate.gpu-admission.io"] == Totals(1.0, 50)
    assert moved.webhooks["validate.gpu-admission.io"].count == 50
    assert moved.webhooks["validate.gpu-admission.io"].mean == pytest.approx(0.04)
    assert moved.plugins == {}  # nothing observed: left out
    assert Totals().mean is None


# ------------------------------------------------------------------ statistics


def test_percentiles_interpolate_between_ranks() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 4.0
    assert percentile(values, 0.5) == 2.5
    assert math.isnan(percentile([], 0.5))
    assert stdev([2.0, 4.0]) == pytest.approx(math.sqrt(2))
    assert stdev([3.0]) == 0.0


def _sample(arm: str, round_index: int, seconds: float, webhook: bool = False) -> Sample:
    return Sample(
        arm=arm,
        round=round_index,
        position=0,
        pods=100,
        seconds=seconds,
        latencies=[0.010] * 50 + [0.030] * 50,
        errors=[],
        cpu_seconds={
            "kube-apiserver": 0.2,
            "etcd": 0.05,
            "client": 0.03,
            **({"webhook": 0.1} if webhook else {}),
        },
        webhooks={"mutate.gpu-admission.io": Totals(0.2, 100)} if webhook else {},
    )


def test_summaries_compare_with_the_floor_in_all_and_round_by_round() -> None:
    samples = [
        _sample("none", 0, 0.5),  # 200 pods/s
        _sample("none", 1, 1.0),  # 100 pods/s
        _sample("ours", 0, 1.0, webhook=True),  # 100 pods/s: half the floor
        _sample("ours", 1, 1.0, webhook=True),  # 100 pods/s: as fast as the floor
    ]
    none, ours = summarize(samples, ["none", "ours"])
    assert none.rate_mean == 150 and none.ratio == 1.0
    assert ours.rate_mean == 100 and ours.ratio == pytest.approx(100 / 150)
    assert ours.paired_ratio == pytest.approx(0.75)
    assert (ours.rate_min, ours.rate_max) == (100, 100)
    assert ours.p50_ms == pytest.approx(20.0)
    assert ours.p99_ms == pytest.approx(30.0)
    assert ours.cpu_ms_per_pod["kube-apiserver"] == pytest.approx(2.0)
    assert ours.cpu_ms_per_pod["webhook"] == pytest.approx(1.0)
    assert "webhook" not in none.cpu_ms_per_pod
    assert ours.webhook_ms["mutate.gpu-admission.io"] == pytest.approx(2.0)
    assert ours.webhook_calls_per_pod["mutate.gpu-admission.io"] == 1.0


def test_without_the_floor_there_is_no_ratio() -> None:
    (ours,) = summarize([_sample("ours", 0, 1.0)], ["ours"])
    assert ours.ratio is None and ours.paired_ratio is None


# ------------------------------------------------------------------ tables


def test_markdown_table_pads_columns_and_right_aligns_numbers() -> None:
    table = markdown_table(["arm", "pods/s"], [["`none`", "1,234.5"], ["`cel`", "9.0"]])
    assert table.splitlines() == [
        "| arm    |  pods/s |",
        "|--------|--------:|",
        "| `none` | 1,234.5 |",
        "| `cel`  |     9.0 |",
    ]
    with pytest.raises(ValueError):
        markdown_table(["a", "b"], [["only one"]])


def test_numbers_and_missing_values() -> None:
    assert number(1234.56) == "1,234.6"
    assert number(0.123, 2) == "0.12"
    assert number(None) == "n/a"
    assert number(math.nan) == "n/a"


def test_throughput_table_has_a_row_per_arm_and_a_column_per_webhook() -> None:
    samples = [_sample("none", 0, 0.5), _sample("ours", 0, 1.0, webhook=True)]
    lines = throughput_table(
        summarize(samples, ["none", "ours"]), ["mutate.gpu-admission.io"]
    ).splitlines()
    assert len(lines) == 4
    assert "mutate ms/call" in lines[0]
    assert lines[2].startswith("| `none`") and "n/a" in lines[2]
    assert lines[3].startswith("| `ours`") and "0.50" in lines[3]


def test_cpu_model_is_read_from_cpuinfo() -> None:
    cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n"
    assert cpu_model(cpuinfo) == "AMD EPYC 7B13"


# ------------------------------------------------------------------ the arms' pieces


def test_cel_literals_are_typed_by_their_path() -> None:
    assert cel_string("it's") == "'it\\'s'"
    toleration = {"key": "gpu-pool", "operator": "Equal", "value": "inference"}
    assert cel_literal([toleration], "Object.spec.tolerations") == (
        "[Object.spec.tolerations{key: 'gpu-pool', operator: 'Equal', value: 'inference'}]"
    )
    assert json_patch("add", "/spec/tolerations/-", {"key": "k"}) == (
        "JSONPatch{op: 'add', path: '/spec/tolerations/-', "
        "value: Object.spec.tolerations{key: 'k'}}"
    )
    assert json_patch("add", "/spec/priority", 1000) == (
        "JSONPatch{op: 'add', path: '/spec/priority', value: 1000}"
    )


def test_cel_policies_are_bound_and_scoped_like_the_webhooks() -> None:
    objects = policy_objects(load_default_policy())
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]
    mutating, validating = objects[0]["spec"], objects[2]["spec"]
    assert mutating["matchConditions"][0]["name"] == "gpu-relevant-pod"
    assert [c["name"] for c in validating["matchConditions"]] == [
        "gpu-relevant-pod",
        "scheduling-changed",
    ]
    expression = mutating["mutations"][0]["jsonPatch"]["expression"]
    assert "'inference-priority'" in expression and "'training-priority'" in expression


def test_stub_replies_echo_the_uid_around_a_fixed_patch() -> None:
    patch = [{"op": "add", "path": "/spec/priority", "value": 1000}]
    prefix, suffix = reply_parts(patch)
    reply = orjson.loads(prefix + orjson.dumps("abc-123") + suffix)
    assert reply["response"]["uid"] == "abc-123"
    assert reply["response"]["allowed"] is True
    assert reply["response"]["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(reply["response"]["patch"])) == patch
    prefix, suffix = reply_parts(None)
    plain = orjson.loads(prefix + b'"u"' + suffix)["response"]
    assert plain == {"uid": "u", "allowed": True}


def test_pod_bodies_differ_only_in_their_names() -> None:
    bodies = [orjson.loads(b) for b in pod_bodies("pod", 3)]
    assert [b["metadata"]["name"] for b in bodies] == ["pod-00000", "pod-00001", "pod-00002"]
    for body in bodies:
        body["metadata"]["name"] = "x"
    assert bodies[0] == bodies[2] == benchmark_pod("x")


# ------------------------------------------------------------------ CPU profiles

WEBHOOK_PKG = "k8s.io/apiserver/pkg/admission/plugin/webhook"
MUTATE = f"{WEBHOOK_PKG}/mutating.(*mutatingDispatcher).callAttrMutatingHook"
VALIDATE = f"{WEBHOOK_PKG}/validating.(*validatingDispatcher).Dispatch"
SHOULD_CALL = f"{WEBHOOK_PKG}/generic.(*Webhook).ShouldCallHook"
CREATE = "k8s.io/apiserver/pkg/registry/generic/registry.(*Store).create"

# What `go tool pprof -traces -sample_index=cpu -unit=ms` prints, cut down: a label
# line, an inlined frame, and values in more than one unit.
TRACES = f"""\
File: kube-apiserver
Build ID: 65a7e72efac5d2e82d85de1fec4de5f659494764
Type: cpu
Time: 2026-12-01 04:23:32 UTC
Duration: 10.01s, Total samples = 80ms ( 0.80%)
-----------+-------------------------------------------------------
      30ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker.func2
             runtime.systemstack
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      10ms   k8s.io/apimachinery/pkg/runtime.toUnstructured
             k8s.io/apiserver/pkg/admission/plugin/cel.newActivation (inline)
             {WEBHOOK_PKG}/matchconditions.(*matcher).Match
             {SHOULD_CALL}
             {VALIDATE}
             {CREATE}
-----------+-------------------------------------------------------
   handler:  create
      20ms   encoding/json.Unmarshal
             gopkg.in/evanphx/json-patch%2ev4.DecodePatch
             {MUTATE}
-----------+-------------------------------------------------------
      10ms   encoding/json.(*decodeState).object
             k8s.io/client-go/rest.Result.Into
             {MUTATE}.func2
             {MUTATE}
-----------+-------------------------------------------------------
     0.01s   syscall.Syscall
             crypto/tls.(*Conn).Write
             net/http.(*persistConn).writeLoop
-----------+-------------------------------------------------------
"""


def test_pprof_durations() -> None:
    assert parse_duration("10ms") == pytest.approx(0.010)
    assert parse_duration("1.20s") == pytest.approx(1.2)
    assert parse_duration("150us") == pytest.approx(150e-6)
    assert parse_duration("0") == 0.0
    with pytest.raises(ValueError):
        parse_duration("handler:")


def test_traces_are_samples_with_their_stacks_innermost_first() -> None:
    traces = parse_traces(TRACES)
    assert [round(t.seconds * 1000) for t in traces] == [30, 10, 20, 10, 10]
    assert traces[0].frames[0] == "runtime.scanobject"
    assert traces[0].frames[-1] == "runtime.gcBgMarkWorker"
    assert traces[1].frames[1] == "k8s.io/apiserver/pkg/admission/plugin/cel.newActivation"
    assert traces[2].frames == ("encoding/json.Unmarshal", traces[2].frames[1], MUTATE)
    assert parse_traces("File: kube-apiserver\nType: cpu\n") == []


def test_each_sample_goes_to_the_first_family_on_its_stack() -> None:
    families = [family_of(t.frames) for t in parse_traces(TRACES)]
    # CEL under the validating dispatcher and the registry's create is the CEL's;
    # decoding the reply under the mutating hook is the reply's, not the patch's.
    assert families == ["GC", "matchConditions", "patch", "reply", "webhook HTTP"]
    assert family_of(["runtime.memmove", "net/http.(*conn).serve"]) == OTHER
    assert family_of([CREATE]) == "storage"
    assert family_of([f"{WEBHOOK_PKG}/predicates/object.(*Matcher).MatchObjectSelector"]) == (
        "selection"
    )
    policy = "k8s.io/apiserver/pkg/admission/plugin/policy/mutating.(*Plugin).Admit"
    assert family_of(["github.com/google/cel-go/interpreter.(*evalOr).Eval", policy]) == (
        "policies"
    )


def test_families_add_up_to_the_profile_and_divide_by_the_pods() -> None:
    seconds = family_seconds(parse_traces(TRACES))
    assert list(seconds) == [*(f.name for f in FAMILIES), OTHER]
    assert sum(seconds.values()) == pytest.approx(0.080)
    assert seconds["GC"] == pytest.approx(0.030)
    breakdown = per_pod("ours", seconds, pods=20)
    assert breakdown.total == pytest.approx(4.0)  # 80 ms over 20 pods
    assert breakdown.ms_per_pod["patch"] == pytest.approx(1.0)
    assert breakdown.ms_per_pod[OTHER] == 0.0


def test_profile_table_has_a_row_per_arm_and_leaves_out_empty_families() -> None:
    ours = per_pod("ours", family_seconds(parse_traces(TRACES)), pods=20)
    none = per_pod("none", family_seconds([Trace(0.010, ("runtime.gcBgMarkWorker",))]), 10)
    lines = profile_table([ours, none]).splitlines()
    headers = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert headers == [
        "arm",
        "pods",
        "GC",
        "matchConditions",
        "reply",
        "webhook HTTP",
        "patch",
        "total",
    ]
    assert lines[2].split("|")[1].strip() == "`ours`"
    assert lines[2].split("|")[-2].strip() == "4.00"
    assert lines[3].split("|")[3].strip() == "1.00"  # none: 10 ms of GC over 10 pods


def test_profile_report_names_the_command_and_checks_the_total_against_proc() -> None:
    capture = Capture("ours", "/tmp/profiles/ours.pprof", 10, pods=20, apiserver_cpu_seconds=0.09)
    capture.errors.append("500: connection reset")
    ours = per_pod("ours", family_seconds(parse_traces(TRACES)), pods=20)
    text = profile_report([capture], [ours])
    assert "go tool pprof -traces -sample_index=cpu -unit=ms /tmp/profiles/ARM.pprof" in text
    assert "| `ours` |" in text.replace("  ", " ")
    assert "`ours` 0.1 vs 0.1" in text  # 80 ms sampled, 90 ms from /proc
    assert "1 failed creates" in text
