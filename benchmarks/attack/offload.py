"""Where to judge the largest review: on the event loop, in a thread, or in a process.

    python -m benchmarks.attack.offload [--reviews 2]

Judges the largest object the engine judges (`--reviews` times in a row, as
decode + engine + encode) on an event loop while a ticker on that loop sleeps 2 ms at a
time and records how late it wakes up: the lag any other request on the loop would
see. Run in this process, so with the engine as it is now and no server around it.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import multiprocessing
import sys
import time
from collections.abc import Awaitable, Callable

from benchmarks.attack.payloads import largest_judged_deployment_review
from webhook.engine import Engine
from webhook.engine.inventory import UNKNOWN
from webhook.engine.request import MAX_VALUES
from webhook.http.judging import Judged, judge_body
from webhook.policy import load_default_policy

TICK = 0.002

_engine: Engine | None = None


def judge(body: bytes) -> Judged:
    global _engine
    if _engine is None:
        _engine = Engine(load_default_policy())
    return judge_body("validate", _engine, body, UNKNOWN)


async def lag_while(work: Callable[[], Awaitable[object]]) -> tuple[float, list[float]]:
    stop = asyncio.Event()
    lags: list[float] = []

    async def tick() -> None:
        while not stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(TICK)
            lags.append(time.perf_counter() - started - TICK)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    await work()
    wall = time.perf_counter() - started
    stop.set()
    await ticker
    return wall, sorted(lags)


def report(name: str, wall: float, lags: list[float]) -> None:
    def at(fraction: float) -> float:
        return lags[min(len(lags) - 1, int(fraction * len(lags)))] * 1e3

    print(
        f"{name:<32} wall {wall:6.2f} s   loop lag p50 {at(0.5):7.1f} ms  p99 {at(0.99):7.1f} ms"
        f"  max {lags[-1] * 1e3:7.1f} ms  ticks {len(lags)}"
    )


async def main(reviews: int) -> None:
    body = largest_judged_deployment_review(MAX_VALUES)
    judge(b"{}")  # the engine built before measuring
    loop = asyncio.get_running_loop()

    async def inline() -> None:
        for _ in range(reviews):
            judge(body)

    def offloaded(executor: concurrent.futures.Executor) -> Callable[[], Awaitable[object]]:
        async def run() -> None:
            for _ in range(reviews):
                await loop.run_in_executor(executor, judge, body)

        return run

    report("on the event loop", *await lag_while(inline))
    for interval in (0.005, 0.001):
        sys.setswitchinterval(interval)
        with concurrent.futures.ThreadPoolExecutor(1) as threads:
            name = f"in a thread (switch {interval * 1e3:.0f} ms)"
            report(name, *await lag_while(offloaded(threads)))
    sys.setswitchinterval(0.005)
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as processes:
        await loop.run_in_executor(processes, judge, b"{}")  # started and warm
        report("in a worker process", *await lag_while(offloaded(processes)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.attack.offload", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--reviews", type=int, default=2)
    asyncio.run(main(parser.parse_args().reviews))
