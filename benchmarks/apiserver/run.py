"""Pod CREATE throughput through a real kube-apiserver, with and without gpu-admission.

    python -m benchmarks.apiserver [--rounds 20] [--pods 300] [--creators 16]
                                   [--arms none,ours,...] [--json FILE]
                                   [--profile DIR [--profile-seconds 10]]

A control plane of the e2e harness (`tests/e2e`), etcd and kube-apiserver only (see
`benchmarks.common.cluster`), in a temporary directory. Each round creates
``--pods`` pods per arm with ``--creators`` concurrent clients, the arms in an order
rotated every round; an arm's pods go to a namespace of its own for that round (opted
in with the policy's label), and are deleted after its window. The arms
(`benchmarks.apiserver.arms`):

- `none`: no admission configuration, the floor;
- `ours`: gpu-admission's webhooks as shipped, `serve` on the default policy;
- `ours-dra`: the same webhooks for a pod claiming its GPU through a
  ResourceClaimTemplate (Dynamic Resource Allocation), served by a second `serve` with
  the live inventory on, which reads the template from kube-apiserver at each call;
- `ours-cel-scope`: the same server, the pods' scope decided by CEL matchConditions
  alone (no objectSelector), as shipped before;
- `allow-python`: the same configurations pointing at a server on the same stack
  (FastAPI, uvicorn, TLS) that allows everything unchanged;
- `allow-go`: the same, at a Go net/http server (`benchmarks/apiserver/allow_go`);
- `patch-floor`: the same, at a server on our stack answering every pod with the
  patch our engine returns for it, worked out once;
- `cel`: no webhook: a MutatingAdmissionPolicy and a ValidatingAdmissionPolicy doing a
  comparable mutation and checks in CEL (`benchmarks.apiserver.cel`).

Before each window, kube-apiserver is switched to the arm and probed until the arm
shows (`Arms.switch`), then every client creates its share of ``--warmup`` pods.
Over each window: its wall-clock time (pods/s), each create's latency, the CPU time
of kube-apiserver, etcd, the arm's webhook server (with its child processes) and this
client from /proc, and kube-apiserver's admission metrics (`/metrics` scraped just
before and after: mean time per call of each webhook, time per pod of each admission
plugin). The report is a markdown table with the command, machine and date.

With ``--profile DIR``, after the rounds, each arm in turn is switched to and loaded
by the same creators while kube-apiserver profiles its own CPU (its pprof endpoint);
``DIR/<arm>.pprof`` is kept, and a second table splits kube-apiserver's CPU per pod
into families of functions (`benchmarks.apiserver.profile`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmarks.apiserver.arms import (
    ALLOW_GO,
    ARMS,
    CEL,
    DRA_ARMS,
    NONE,
    OURS,
    OURS_DRA,
    PATCH_FLOOR,
    Arms,
)
from benchmarks.apiserver.load import pod_bodies, run_window
from benchmarks.apiserver.metrics import AdmissionMetrics, admission_delta, admission_metrics
from benchmarks.apiserver.profile import (
    MAX_PODS_PER_SECOND,
    Capture,
    breakdown,
    capture_profile,
    profile_report,
)
from benchmarks.apiserver.report import Sample, Summary, plugin_table, summarize, throughput_table
from benchmarks.common.cluster import Api, apiserver_only
from benchmarks.common.processes import tree_cpu_seconds
from benchmarks.common.report import machine, percentile, rotated
from tests.e2e.build_controlplane import ensure_binaries, pinned_kubernetes_version
from tests.e2e.controlplane import ControlPlane
from tests.e2e.webhook_server import WEBHOOK_TIMEOUT_SECONDS
from webhook.install.configurations import MUTATING_WEBHOOK, VALIDATING_WEBHOOK
from webhook.policy.load import load_default_policy


def parse_arms(text: str) -> tuple[str, ...]:
    arms = tuple(a.strip() for a in text.split(",") if a.strip())
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        raise argparse.ArgumentTypeError(f"arms are {', '.join(ARMS)}; not {unknown or text!r}")
    return tuple(dict.fromkeys(arms))


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.apiserver", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--pods", type=int, default=300, help="pods per arm per round")
    parser.add_argument("--creators", type=int, default=16, help="concurrent clients")
    parser.add_argument(
        "--warmup", type=int, help="pods created before each window (default: 2 per client)"
    )
    parser.add_argument("--arms", type=parse_arms, default=ARMS, help="comma-separated subset")
    parser.add_argument("--json", type=Path, help="write every window's figures here")
    parser.add_argument(
        "--go-http1", action="store_true", help="allow-go serves HTTP/1.1 only (default: h2)"
    )
    parser.add_argument(
        "--apiserver-flag",
        action="append",
        default=[],
        help="an extra kube-apiserver flag, e.g. --apiserver-flag=--feature-gates=X=true",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="after the rounds, profile kube-apiserver's CPU under each arm's load into DIR",
    )
    parser.add_argument(
        "--profile-seconds",
        type=int,
        default=10,
        help="length of each profile (default 10; kube-apiserver's request timeout is 60)",
    )
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = 2 * args.creators
    if args.profile_seconds < 1:
        parser.error("--profile-seconds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    command = shlex.join(["python", "-m", "benchmarks.apiserver", *(argv or sys.argv[1:])])
    started = time.monotonic()
    at_start = machine()
    work_dir = Path(tempfile.mkdtemp(prefix="gpu-admission-bench-apiserver-"))
    cluster = apiserver_only(ensure_binaries(), work_dir / "cluster", tuple(args.apiserver_flag))
    cluster.start()
    api = Api(cluster.api_url, cluster.admin_ssl_context())
    policy = load_default_policy()
    arms = Arms(
        api,
        policy,
        work_dir,
        args.arms,
        "bench-probe",
        go_http1=args.go_http1,
        kubeconfig=cluster.kubeconfig,
    )
    captures: list[Capture] = []
    failed = True
    try:
        arms.start()
        log(f"servers up after {time.monotonic() - started:.1f}s; work dir {work_dir}")
        samples = measure(args, cluster, api, arms)
        if args.profile:
            captures = profile(args, cluster, api, arms)
        failed = False
    finally:
        go_stats = arms.go_stats() if not failed and ALLOW_GO in args.arms else None
        arms.stop()
        api.close()
        cluster.stop()
        if failed or args.keep:
            log(f"logs kept in {work_dir}")
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    elapsed = time.monotonic() - started
    summaries = summarize(samples, args.arms)
    text = report(command, args, at_start, summaries, arms, go_stats, elapsed)
    breakdowns = [breakdown(c) for c in captures]
    if captures:
        text += "\n\n" + profile_report(captures, breakdowns)
    print(text)
    if args.json:
        args.json.write_bytes(
            orjson.dumps(
                {
                    "command": command,
                    "machine": at_start,
                    "seconds": elapsed,
                    "summaries": [dataclasses.asdict(s) for s in summaries],
                    "samples": [dataclasses.asdict(s) for s in samples],
                    "patch": arms.patch,
                    "go": go_stats,
                    "profiles": [dataclasses.asdict(c) for c in captures],
                    "profile_breakdowns": [dataclasses.asdict(b) for b in breakdowns],
                },
                option=orjson.OPT_INDENT_2,
            )
        )
    return 1 if any(s.errors for s in summaries) or any(c.errors for c in captures) else 0


def log(message: str) -> None:
    print(f"[bench-apiserver] {message}", file=sys.stderr, flush=True)


def measure(args: argparse.Namespace, cluster: ControlPlane, api: Api, arms: Arms) -> list[Sample]:
    work = {dra: pod_bodies("pod", args.pods, dra) for dra in (False, True)}
    warmup = {dra: pod_bodies("warmup", args.warmup, dra) for dra in (False, True)}
    context = cluster.admin_ssl_context()
    processes = {"kube-apiserver": cluster.pid_of("kube-apiserver"), "etcd": cluster.pid_of("etcd")}
    samples: list[Sample] = []
    for round_index in range(args.rounds):
        for position, arm in enumerate(rotated(args.arms, round_index)):
            namespace = f"bench-{round_index:03d}-{arm}"
            api.create_namespace(namespace, arms.opt_in)
            switching = time.monotonic()
            arms.switch(arm)
            switched = time.monotonic() - switching
            arms.prepare(arm, namespace)  # judged by the arm's own webhooks
            roots = dict(processes)
            if (pid := arms.webhook_pid(arm)) is not None:
                roots["webhook"] = pid
            marks: dict[str, Any] = {}

            def before(roots: dict[str, int] = roots, marks: dict[str, Any] = marks) -> None:
                marks["metrics"] = admission_metrics(api.text("/metrics"))
                marks["cpu"] = tree_cpu_seconds(roots)

            def after(roots: dict[str, int] = roots, marks: dict[str, Any] = marks) -> None:
                marks["cpu"] = {
                    name: seconds - marks["cpu"][name]
                    for name, seconds in tree_cpu_seconds(roots).items()
                }
                marks["metrics"] = admission_delta(
                    admission_metrics(api.text("/metrics")), marks["metrics"]
                )

            dra = arm in DRA_ARMS
            window = run_window(
                cluster.api_url,
                context,
                namespace,
                work[dra],
                warmup[dra],
                args.creators,
                before,
                after,
            )
            cluster.check_running()
            arms.check_running()
            metrics: AdmissionMetrics = marks["metrics"]
            sample = Sample(
                arm=arm,
                round=round_index,
                position=position,
                pods=window.pods,
                seconds=window.seconds,
                latencies=window.latencies,
                errors=window.errors,
                cpu_seconds={**marks["cpu"], "client": window.client_cpu_seconds},
                webhooks=metrics.webhooks,
                plugins=metrics.plugins,
            )
            samples.append(sample)
            deleting = time.monotonic()
            deleted = api.delete_pods(namespace)
            deletion = time.monotonic() - deleting
            log(
                f"round {round_index + 1}/{args.rounds} {arm:>12}: "
                f"{sample.pods_per_second:7.1f} pods/s, "
                f"p50 {1000 * percentile(window.latencies, 0.5):6.1f} ms, "
                f"{len(window.errors)} errors; switched in {switched:.1f}s, "
                f"{deleted} pods deleted in {deletion:.1f}s"
            )
            if window.errors:
                log(f"  first errors: {window.errors[:3]}")
    return samples


def profile(args: argparse.Namespace, cluster: ControlPlane, api: Api, arms: Arms) -> list[Capture]:
    """A CPU profile of kube-apiserver under each arm's load (`benchmarks.apiserver.profile`)."""
    args.profile.mkdir(parents=True, exist_ok=True)
    seconds = args.profile_seconds
    # Enough for the profile, the ramp before it and its reply's way back.
    count = math.ceil(MAX_PODS_PER_SECOND * (seconds + 5))
    bodies = {dra: pod_bodies("profiled", count, dra) for dra in (False, True)}
    warmup = {dra: pod_bodies("warmup", args.warmup, dra) for dra in (False, True)}
    captures = []
    for arm in args.arms:
        namespace = f"bench-profile-{arm}"
        api.create_namespace(namespace, arms.opt_in)
        arms.switch(arm)
        arms.prepare(arm, namespace)
        dra = arm in DRA_ARMS
        capture = capture_profile(
            arm,
            cluster.api_url,
            cluster.admin_ssl_context(),
            namespace,
            bodies[dra],
            warmup[dra],
            args.creators,
            seconds,
            args.profile / f"{arm}.pprof",
            cluster.pid_of("kube-apiserver"),
        )
        cluster.check_running()
        arms.check_running()
        deleted = api.delete_pods(namespace)
        captures.append(capture)
        log(
            f"profile {arm:>14}: {capture.pods} pods in {seconds}s, kube-apiserver "
            f"{capture.apiserver_cpu_seconds:.1f} CPU s, {len(capture.errors)} errors; "
            f"{deleted} pods deleted -> {capture.path}"
        )
        if capture.errors:
            log(f"  first errors: {capture.errors[:3]}")
    return captures


def report(
    command: str,
    args: argparse.Namespace,
    at_start: dict[str, Any],
    summaries: list[Summary],
    arms: Arms,
    go_stats: dict[str, int] | None,
    elapsed: float,
) -> str:
    load = ", ".join(f"{x:.2f}" for x in at_start["load"])
    end_load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        f"### {at_start['date'][:10]}, pod CREATE throughput through kube-apiserver",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- {args.rounds} rounds x {args.pods} pods per arm, {args.creators} concurrent "
        f"creators, {args.warmup} warm-up pods per window; arm order rotated each round",
        f"- kube-apiserver and etcd {pinned_kubernetes_version()} (no scheduler, no "
        "controller-manager), everything on 127.0.0.1; webhooks as `render_webhook_configurations` "
        f"renders them for a URL, timeout {WEBHOOK_TIMEOUT_SECONDS} s (the e2e harness's)",
        f"- machine: {at_start['nproc']} CPUs, {at_start['cpu']}, Linux {at_start['kernel']}, "
        f"Python {at_start['python']}; {at_start['date']}",
        f"- 1/5/15-minute load average at start {load}, at end {end_load}; "
        f"run took {elapsed / 60:.1f} min",
        "",
        throughput_table(summaries, [MUTATING_WEBHOOK, VALIDATING_WEBHOOK]),
        "",
        "Time in each admission plugin per pod (kube-apiserver's "
        "`apiserver_admission_controller_admission_duration_seconds`):",
        "",
        plugin_table(summaries),
        "",
    ]
    errors = [s for s in summaries if s.errors]
    if errors:
        lines.append(
            "**Failed creates**: "
            + ", ".join(f"`{s.arm}` {s.errors}" for s in errors)
            + " (not counted in pods/s)"
        )
    calls = ", ".join(
        f"`{s.arm}` "
        + " + ".join(f"{n}: {c:.2f}" for n, c in sorted(s.webhook_calls_per_pod.items()))
        for s in summaries
        if s.webhook_calls_per_pod
    )
    if calls:
        lines.append(f"- webhook calls per pod: {calls}")
    lines.append(f"- mutation: {mutation_check(arms)}")
    lines.append(f"- targets: {target_check(summaries)}")
    if go_stats is not None:
        lines.append(
            f"- allow-go answered {go_stats.get('http2', 0):,} reviews over HTTP/2 and "
            f"{go_stats.get('http1', 0):,} over HTTP/1.1"
        )
    return "\n".join(lines)


TARGETS = (
    ("pods/s", OURS, PATCH_FLOOR, 0.95, True),
    ("pods/s", OURS, CEL, 1.0, True),
    ("kube-apiserver CPU per pod", OURS, PATCH_FLOOR, 1.3, False),
    ("pods/s", OURS_DRA, OURS, 0.0, True),
)
"""(what, arm, against, bound, at least): the issue's targets, and the DRA arm's rate
against `ours` (no bound: reported)."""


def target_check(summaries: Sequence[Summary]) -> str:
    """Each target's ratio from the arms run, met or missed."""
    by_arm = {s.arm: s for s in summaries}
    parts = []
    for what, arm, against, bound, at_least in TARGETS:
        if arm not in by_arm or against not in by_arm:
            continue
        mine, theirs = by_arm[arm], by_arm[against]
        if what == "pods/s":
            ratio = mine.rate_mean / theirs.rate_mean if theirs.rate_mean else math.nan
        else:
            own = mine.cpu_ms_per_pod.get("kube-apiserver", math.nan)
            ratio = own / theirs.cpu_ms_per_pod.get("kube-apiserver", math.nan)
        if not bound:
            parts.append(f"`{arm}` {what} {ratio:.2f} of `{against}`'s")
            continue
        met = ratio >= bound if at_least else ratio <= bound
        sign = ">=" if at_least else "<="
        verdict = "met" if met else "MISSED"
        parts.append(f"`{arm}` {what} {ratio:.2f} of `{against}`'s ({sign} {bound}: {verdict})")
    return "; ".join(parts) or "no pair of arms to compare"


def mutation_check(arms: Arms) -> str:
    """Whether `patch-floor` and `cel` leave the pod as `ours` does."""
    probes = arms.probes
    if OURS not in probes:
        return "not compared (no `ours` arm)"
    reference = probes[OURS].mutated_fields
    parts = []
    for arm in (PATCH_FLOOR, CEL):
        if arm in probes:
            same = probes[arm].mutated_fields == reference
            parts.append(
                f"`{arm}` {'leaves the pod as `ours` does' if same else 'DIFFERS from `ours`'}"
                + ("" if same else f": {probes[arm].mutated_fields} vs {reference}")
            )
    if NONE in probes and probes[NONE].mutated:
        parts.append("`none` MUTATED the pod")
    return "; ".join(parts) or "nothing to compare"


if __name__ == "__main__":
    raise SystemExit(main())
