"""The results of `benchmarks.service`: runs summarized over rounds, and the markdown.

Pure functions of the runs measured (``Run``); nothing here starts or times anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.common.report import markdown_table, number, percentile
from benchmarks.service.load_generator import LoadResult

OURS = "ours"
FLOOR = "constant-allow"
SERVERS = (OURS, FLOOR)
ROUTES = ("/mutate", "/validate")
SATURATION = "saturation"
LOADS = (SATURATION, "50%", "90%")
FRACTIONS = {"50%": 0.5, "90%": 0.9}
SHOWN_PERCENTILES = ("p50", "p99", "p99.9")


@dataclass(frozen=True)
class Run:
    """One run of the load generator against one server's route, and the server's CPU
    time (utime + stime of it and its children) over the measured window."""

    server: str
    route: str
    load: str
    round: int
    result: LoadResult
    server_cpu_seconds: float

    @property
    def answered(self) -> int:
        return self.result.count + self.result.errors

    @property
    def cpu_us_per_review(self) -> float | None:
        return 1e6 * self.server_cpu_seconds / self.answered if self.answered else None


@dataclass(frozen=True)
class Summary:
    """One server, route and load over all rounds: medians of the per-round figures."""

    server: str
    route: str
    load: str
    rounds: int
    reviews: int
    errors: int
    dropped: int
    rate: float
    """Requests per second asked for (open loop), 0 for saturation (closed loop)."""
    throughput: float
    throughput_min: float
    throughput_max: float
    cpu_us_per_review: float | None
    latency_ms: dict[str, float]
    client_cpu_share: float
    """The load generator's CPU seconds per second of its run (of its core)."""


def median(values: Sequence[float]) -> float:
    return percentile(values, 0.5)


def summarize(runs: Sequence[Run]) -> list[Summary]:
    """Per server, route and load, in the order of SERVERS, ROUTES and LOADS."""
    summaries = []
    for route in ROUTES:
        for load in LOADS:
            for server in SERVERS:
                own = [r for r in runs if (r.server, r.route, r.load) == (server, route, load)]
                if not own:
                    continue
                cpu = [c for r in own if (c := r.cpu_us_per_review) is not None]
                summaries.append(
                    Summary(
                        server=server,
                        route=route,
                        load=load,
                        rounds=len(own),
                        reviews=sum(r.result.count for r in own),
                        errors=sum(r.result.errors for r in own),
                        dropped=sum(r.result.dropped for r in own),
                        rate=median([r.result.rate for r in own]),
                        throughput=median([r.result.throughput for r in own]),
                        throughput_min=min(r.result.throughput for r in own),
                        throughput_max=max(r.result.throughput for r in own),
                        cpu_us_per_review=median(cpu) if cpu else None,
                        latency_ms={
                            name: median([r.result.latency_ms.get(name, 0.0) for r in own])
                            for name in SHOWN_PERCENTILES
                        },
                        client_cpu_share=median(
                            [
                                r.result.cpu_seconds / r.result.duration
                                for r in own
                                if r.result.duration > 0
                            ]
                        ),
                    )
                )
    return summaries


def ratio(ours: float | None, floor: float | None) -> float | None:
    if ours is None or floor is None or floor == 0:
        return None
    return ours / floor


def _times(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def _load_label(summary: Summary, connections: int) -> str:
    if summary.load == SATURATION:
        return f"saturation ({connections} conn.)"
    return f"{summary.load} ({summary.rate:,.0f}/s)"


def _server_row(summary: Summary, connections: int) -> list[str]:
    spread = f" ({summary.throughput_min:,.0f} to {summary.throughput_max:,.0f})"
    return [
        f"{summary.route} {_load_label(summary, connections)}",
        summary.server,
        number(summary.throughput, 0) + (spread if summary.rounds > 1 else ""),
        number(summary.cpu_us_per_review, 0),
        *(number(summary.latency_ms[name], 2) for name in SHOWN_PERCENTILES),
        f"{summary.errors:,} / {summary.dropped:,}",
    ]


def results_table(summaries: Sequence[Summary], connections: int) -> str:
    """Per route and load, a row per server and a row of ours over the floor.

    Errors are replies that were not a 200 allowing the review (or no reply); dropped,
    open-loop requests still unanswered a while after the run's end, which the latency
    figures do not count: a run that drops requests fell behind its rate."""
    headers = [
        "route, load",
        "server",
        "reviews/s (range)",
        "CPU µs/review",
        *(f"{name} ms" for name in SHOWN_PERCENTILES),
        "errors / dropped",
    ]
    rows: list[list[str]] = []
    by_key = {(s.server, s.route, s.load): s for s in summaries}
    for route in ROUTES:
        for load in LOADS:
            present = [
                by_key[(server, route, load)]
                for server in SERVERS
                if (server, route, load) in by_key
            ]
            rows += [_server_row(s, connections) for s in present]
            ours, floor = by_key.get((OURS, route, load)), by_key.get((FLOOR, route, load))
            if ours is not None and floor is not None:
                rows.append(
                    [
                        "",
                        "**ours / floor**",
                        _times(ratio(ours.throughput, floor.throughput)),
                        _times(ratio(ours.cpu_us_per_review, floor.cpu_us_per_review)),
                        *(
                            _times(ratio(ours.latency_ms[name], floor.latency_ms[name]))
                            for name in SHOWN_PERCENTILES
                        ),
                        "",
                    ]
                )
    return markdown_table(headers, rows)


def per_pod_cpu(summaries: Sequence[Summary]) -> dict[str, float]:
    """CPU µs per pod CREATE (one /mutate and one /validate) at saturation, by server."""
    found: dict[str, float] = {}
    for server in SERVERS:
        parts = [
            s.cpu_us_per_review
            for s in summaries
            if s.server == server and s.load == SATURATION and s.route in ROUTES
        ]
        if len(parts) == len(ROUTES) and all(p is not None for p in parts):
            found[server] = sum(p for p in parts if p is not None)
    return found
