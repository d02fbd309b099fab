"""CPU profiles of kube-apiserver under each arm's load (`benchmarks.apiserver --profile`).

For each arm, after the measured rounds: kube-apiserver is switched to it, ``creators``
threads (the measured windows' `_Creator`, one kept-alive connection each, the same
pod) create their warm-up pods, then create pods without pause; half a second into the
load, ``GET /debug/pprof/profile?seconds=S`` (kube-apiserver serves Go's pprof by
default, ``--profiling``) is sent with the admin client certificate, and the load stops
when the profile comes back, so the profile covers load only. The pods counted are
those whose create was answered within the S seconds after the request was sent.

The profile is summarised from ``go tool pprof -traces``: every sample (a stack and
its CPU time) is put in the first family of ``FAMILIES`` one of whose patterns matches
one of its frames, the rest in ``other``, so the families add up to the profile's
total; each family's CPU is given in milliseconds per pod created.
"""

from __future__ import annotations

import http.client
import itertools
import re
import shlex
import ssl
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.apiserver.load import _Creator
from benchmarks.common.processes import tree_cpu_seconds
from benchmarks.common.report import markdown_table, number

PROFILE_PATH = "/debug/pprof/profile"
RAMP_SECONDS = 0.5
"""Load before the profile starts: every creator has a request in flight by then."""
MAX_PODS_PER_SECOND = 2000
"""Pod bodies serialized beforehand, per second of load: far above what one machine's
kube-apiserver creates."""
PPROF = ("go", "tool", "pprof")


# ------------------------------------------------------------------ capture


@dataclass
class Capture:
    """One arm's profile and the load it covers."""

    arm: str
    path: str
    seconds: int
    pods: int
    """Pods whose create was answered within the profile's seconds."""
    errors: list[str] = field(default_factory=list)
    apiserver_cpu_seconds: float = 0.0
    """kube-apiserver's CPU time from /proc over the profile request (a cross-check)."""
    exhausted: bool = False
    """The pod bodies ran out before the profile ended (then it also covers idle time)."""


class _TimedCreator(_Creator):
    """A measured window's creator that also notes when each create is answered."""

    def __init__(
        self,
        connect: Callable[[], http.client.HTTPSConnection],
        path: str,
        warmup: Sequence[bytes],
        work: Sequence[bytes],
        next_index: Callable[[], int],
        ready: threading.Barrier,
        go: threading.Event,
    ) -> None:
        super().__init__(connect, path, warmup, work, next_index, ready, go)
        self.answered: list[float] = []

    def create(self, body: bytes) -> str | None:
        problem = super().create(body)
        if problem is None:
            self.answered.append(time.perf_counter())
        return problem


def fetch_profile(api_url: str, context: ssl.SSLContext, seconds: int) -> tuple[float, bytes]:
    """``GET /debug/pprof/profile?seconds=S``; when the request was sent, and the profile."""
    parsed = urllib.parse.urlsplit(api_url)
    connection = http.client.HTTPSConnection(
        parsed.hostname or "127.0.0.1", parsed.port or 443, context=context, timeout=seconds + 60
    )
    try:
        connection.connect()
        sent = time.perf_counter()
        connection.request("GET", f"{PROFILE_PATH}?seconds={seconds}")
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise RuntimeError(f"GET {PROFILE_PATH}: {response.status} {data[:300]!r}")
    return sent, data


def capture_profile(
    arm: str,
    api_url: str,
    context: ssl.SSLContext,
    namespace: str,
    bodies: Sequence[bytes],
    warmup: Sequence[bytes],
    creators: int,
    seconds: int,
    out: Path,
    apiserver_pid: int,
) -> Capture:
    """Load kube-apiserver with pod creates while it profiles itself for ``seconds``;
    the profile is written to ``out``."""
    parsed = urllib.parse.urlsplit(api_url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 443

    def connect() -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(host, port, context=context, timeout=60.0)

    stop, exhausted = threading.Event(), threading.Event()
    counter = itertools.count()

    def next_index() -> int:
        if stop.is_set():
            return len(bodies)
        index = next(counter)
        if index >= len(bodies):
            exhausted.set()
        return index

    path = f"/api/v1/namespaces/{namespace}/pods"
    ready = threading.Barrier(creators + 1)
    go = threading.Event()
    threads = [
        _TimedCreator(connect, path, warmup[i::creators], bodies, next_index, ready, go)
        for i in range(creators)
    ]
    for thread in threads:
        thread.start()
    ready.wait()
    try:
        warmup_errors = [e for t in threads for e in t.warmup_errors]
        if warmup_errors:
            raise RuntimeError(f"warm-up creates failed: {warmup_errors[:3]}")
        go.set()
        time.sleep(RAMP_SECONDS)
        before = tree_cpu_seconds({"kube-apiserver": apiserver_pid})["kube-apiserver"]
        sent, profile = fetch_profile(api_url, context, seconds)
        after = tree_cpu_seconds({"kube-apiserver": apiserver_pid})["kube-apiserver"]
    finally:
        stop.set()
        go.set()
        for thread in threads:
            thread.join()
    out.write_bytes(profile)
    answered = [t for thread in threads for t in thread.answered]
    return Capture(
        arm=arm,
        path=str(out),
        seconds=seconds,
        pods=sum(1 for t in answered if sent <= t <= sent + seconds),
        errors=[e for t in threads for e in t.errors],
        apiserver_cpu_seconds=after - before,
        exhausted=exhausted.is_set(),
    )


# ------------------------------------------------------------------ go tool pprof -traces

_UNITS = {"ns": 1e-9, "us": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "hrs": 3600.0}
"""pprof's units of time (``-unit=ms`` prints milliseconds, or ``0``)."""
_DURATION = re.compile(rf"^(\d+(?:\.\d+)?)({'|'.join(_UNITS)})$")
_SEPARATOR = re.compile(r"^-+\+-+$")


def parse_duration(text: str) -> float:
    """Seconds of a duration as pprof prints one: ``10ms``, ``1.20s``, ``0``."""
    text = text.strip()
    if text == "0":
        return 0.0
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"not a pprof duration: {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass(frozen=True)
class Trace:
    seconds: float
    frames: tuple[str, ...]
    """Function names, the innermost first (``(inline)`` marks dropped)."""


def parse_traces(text: str) -> list[Trace]:
    """The samples of ``go tool pprof -traces``: blocks between separator lines, the
    first line of each holding the value then the innermost frame, the other lines
    one frame each, outwards. Label lines (``key:value`` before the value) are skipped."""
    traces: list[Trace] = []
    block: list[str] = []

    def flush() -> None:
        seconds: float | None = None
        frames: list[str] = []
        for line in block:
            stripped = line.strip()
            if not stripped:
                continue
            if seconds is None:
                value, _, frame = stripped.partition(" ")
                try:
                    seconds = parse_duration(value)
                except ValueError:
                    continue  # a label line
                stripped = frame.strip()
            frames.append(stripped.removesuffix(" (inline)"))
        if seconds is not None:
            traces.append(Trace(seconds, tuple(f for f in frames if f)))
        block.clear()

    started = False
    for line in text.splitlines():
        if _SEPARATOR.match(line.strip()):
            if started:
                flush()
            started = True
        elif started:
            block.append(line)
    flush()
    return traces


# ------------------------------------------------------------------ families


@dataclass(frozen=True)
class Family:
    name: str
    """The table's column."""
    patterns: tuple[str, ...]
    """Regular expressions searched for in each frame (function name)."""
    what: str

    def matches(self, frames: Sequence[str]) -> bool:
        return any(re.search(p, frame) for p in self.patterns for frame in frames)


WEBHOOK = r"k8s\.io/apiserver/pkg/admission/plugin/webhook/"
FAMILIES = (
    Family(
        "GC",
        (r"^runtime\.(gcBgMarkWorker|gcAssistAlloc|bgsweep|bgscavenge)$",),
        "the garbage collector's background workers, and allocations' assists to it",
    ),
    Family(
        "policies",
        (r"k8s\.io/apiserver/pkg/admission/plugin/policy/",),
        "MutatingAdmissionPolicy and ValidatingAdmissionPolicy (their CEL included)",
    ),
    Family(
        "matchConditions",
        (
            WEBHOOK + r"matchconditions\.",
            r"k8s\.io/apiserver/pkg/admission/plugin/cel\.",
            r"k8s\.io/apiserver/pkg/cel",
            r"github\.com/google/cel-go/",
        ),
        "webhooks' CEL matchConditions: the pod turned into CEL's input, then evaluated",
    ),
    Family(
        "selection",
        (WEBHOOK + r"predicates/", WEBHOOK + r"generic\.\(\*Webhook\)\.ShouldCallHook$"),
        "choosing the webhooks to call: rules, namespace and object selectors",
    ),
    Family(
        "review",
        (WEBHOOK + r"request\.CreateAdmission", r"k8s\.io/client-go/rest\.\(\*Request\)\.Body$"),
        "building the AdmissionReview and encoding it to JSON",
    ),
    Family(
        "reply",
        (r"k8s\.io/client-go/rest\.Result\.Into$", WEBHOOK + r"request\.VerifyAdmissionResponse"),
        "decoding the webhook's AdmissionReview reply",
    ),
    Family(
        "webhook HTTP",
        (
            r"k8s\.io/client-go/rest\.",
            r"^net/http\.\(\*persistConn\)",
            r"^net/http\.\(\*Transport\)",
            r"^net/http\.setRequestCancel",
            r"^golang\.org/x/net/http2\.\(\*ClientConn\)",
            r"^net/http\.\(\*http2ClientConn\)",
        ),
        "sending the review and reading the reply: client-go, net/http, TLS",
    ),
    Family(
        "patch",
        (
            r"json-patch",
            WEBHOOK + r"mutating\.\(\*mutatingDispatcher\)\.callAttrMutatingHook$",
            WEBHOOK + r"mutating\.\(\*webhookReinvokeContext\)\.IsOutputChanged",
        ),
        "applying a mutating webhook's patch: the pod to JSON, the patch applied, the "
        "result decoded and compared, and whether it changed since (for reinvocation)",
    ),
    Family(
        "webhooks, other",
        (WEBHOOK,),
        "the rest of the webhook plugins: dispatch, versioned copies of the pod",
    ),
    Family(
        "authn",
        (r"k8s\.io/apiserver/pkg/authentication/",),
        "authenticating each create (the client certificate's chain verified per request)",
    ),
    Family(
        "storage",
        (
            r"k8s\.io/apiserver/pkg/registry/",
            r"k8s\.io/apiserver/pkg/storage/",
            r"^go\.etcd\.io/",
            r"^google\.golang\.org/grpc",
        ),
        "the registry's create (validation, the object encoded for etcd), the etcd client, "
        "the watch cache",
    ),
)
OTHER = "other"
OTHER_WHAT = (
    "everything else: serving the client's requests (TLS, HTTP, filters), decoding the "
    "pod, defaulting, managed fields, encoding the response, housekeeping"
)


def family_of(frames: Sequence[str], families: Sequence[Family] = FAMILIES) -> str:
    """The first family one of whose patterns matches one of ``frames``."""
    for family in families:
        if family.matches(frames):
            return family.name
    return OTHER


def family_seconds(
    traces: Sequence[Trace], families: Sequence[Family] = FAMILIES
) -> dict[str, float]:
    """CPU seconds by family, every family present (``other`` last); they add up to
    the traces' total."""
    seconds = {family.name: 0.0 for family in families} | {OTHER: 0.0}
    for trace in traces:
        seconds[family_of(trace.frames, families)] += trace.seconds
    return seconds


# ------------------------------------------------------------------ per pod


@dataclass
class Breakdown:
    """One arm's profile in milliseconds of kube-apiserver CPU per pod."""

    arm: str
    pods: int
    total: float
    ms_per_pod: dict[str, float]
    """By family, ``other`` included: they add up to ``total``."""


def per_pod(arm: str, seconds: Mapping[str, float], pods: int) -> Breakdown:
    scale = 1000 / pods if pods else float("nan")
    ms = {name: value * scale for name, value in seconds.items()}
    return Breakdown(arm=arm, pods=pods, total=sum(ms.values()), ms_per_pod=ms)


def pprof_command(path: str | Path) -> list[str]:
    return [*PPROF, "-traces", "-sample_index=cpu", "-unit=ms", str(path)]


def breakdown(capture: Capture) -> Breakdown:
    """``capture``'s profile summarised by family (runs ``go tool pprof``)."""
    text = subprocess.run(
        pprof_command(capture.path), check=True, capture_output=True, text=True
    ).stdout
    return per_pod(capture.arm, family_seconds(parse_traces(text)), capture.pods)


def profile_table(breakdowns: Sequence[Breakdown], families: Sequence[Family] = FAMILIES) -> str:
    names = [*(f.name for f in families), OTHER]
    shown = [n for n in names if any(round(b.ms_per_pod.get(n, 0.0), 2) for b in breakdowns)]
    headers = ["arm", "pods", *shown, "total"]
    rows = [
        [
            f"`{b.arm}`",
            f"{b.pods:,}",
            *(number(b.ms_per_pod.get(n), 2) for n in shown),
            number(b.total, 2),
        ]
        for b in breakdowns
    ]
    return markdown_table(headers, rows)


def profile_report(
    captures: Sequence[Capture],
    breakdowns: Sequence[Breakdown],
    families: Sequence[Family] = FAMILIES,
) -> str:
    seconds = captures[0].seconds if captures else 0
    directory = Path(captures[0].path).parent if captures else Path("DIR")
    lines = [
        f"kube-apiserver CPU per pod, ms, by what it was doing: a {seconds} s CPU profile "
        "under each arm's load, after the rounds (`--profile`), summarised by",
        "",
        "```sh",
        shlex.join(pprof_command(directory / "ARM.pprof")),
        "```",
        "",
        "each sample in the first family one of whose functions is on its stack:",
        "",
        profile_table(breakdowns, families),
        "",
        *(f"- {f.name}: {f.what}" for f in families),
        f"- {OTHER}: {OTHER_WHAT}",
        "- CPU seconds over each profile, sampled (total x pods) vs /proc: "
        + ", ".join(
            f"`{c.arm}` {b.total * b.pods / 1000:.1f} vs {c.apiserver_cpu_seconds:.1f}"
            for c, b in zip(captures, breakdowns, strict=True)
        ),
    ]
    problems = [c for c in captures if c.errors or c.exhausted]
    for capture in problems:
        lines.append(
            f"- **`{capture.arm}`**: {len(capture.errors)} failed creates"
            + ("; the pods ran out before the profile ended" if capture.exhausted else "")
        )
    return "\n".join(lines)
