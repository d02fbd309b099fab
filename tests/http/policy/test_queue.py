"""The queue of `webhook.http.policy.queue`: one compilation per policy, sources taken
in turn, a bounded share per source, refusals at once."""

from __future__ import annotations

import asyncio

import pytest

from tests.http.live import run
from webhook.http.policy.queue import ChecksBusy, PolicyChecks, Verdict, VerdictCache
from webhook.http.policy.verdict import PolicyQuestion


def question(text: str) -> PolicyQuestion:
    return PolicyQuestion("ns/policy", "policy/policy.yaml", text)


class Compiler:
    """Compiles what it is sent, in order, each when the test lets it."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.go = asyncio.Event()

    async def __call__(self, asked: PolicyQuestion) -> Verdict:
        self.sent.append(asked.text)
        await self.go.wait()
        return None if asked.text.startswith("good") else f"{asked.text} is broken"


async def settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_policy_sent_again_while_it_is_compiled_waits_for_that_compilation() -> None:
    async def scenario() -> None:
        compiler = Compiler()
        checks = PolicyChecks(compiler)
        asked = [asyncio.create_task(checks.verdict("10.0.0.9", question("bad"))) for _ in range(5)]
        await settled()
        compiler.go.set()

        assert await asyncio.gather(*asked) == ["bad is broken"] * 5
        assert compiler.sent == ["bad"]
        assert await checks.verdict("10.0.0.9", question("bad")) == "bad is broken"
        assert checks.compiled == 1

    run(scenario)


def test_sources_are_taken_in_turn_so_a_loop_cannot_keep_another_source_waiting() -> None:
    async def scenario() -> None:
        compiler = Compiler()
        checks = PolicyChecks(compiler)
        tenant = [
            asyncio.create_task(checks.verdict("10.1.0.5", question(f"tenant-{n}")))
            for n in range(2)
        ]
        await settled()
        operator = asyncio.create_task(checks.verdict("10.0.0.1", question("good")))
        await settled()
        compiler.go.set()
        await asyncio.gather(operator, *tenant)

        assert compiler.sent == ["tenant-0", "good", "tenant-1"]

    run(scenario)


def test_a_source_past_its_share_is_refused_at_once_and_others_still_wait() -> None:
    async def scenario() -> None:
        compiler = Compiler()
        checks = PolicyChecks(compiler, per_source=1)
        first = asyncio.create_task(checks.verdict("10.1.0.5", question("tenant-0")))
        await settled()  # being compiled
        waiting = asyncio.create_task(checks.verdict("10.1.0.5", question("tenant-1")))
        await settled()

        with pytest.raises(ChecksBusy) as refused:
            await checks.verdict("10.1.0.5", question("tenant-2"))
        assert refused.value.per_source
        operator = asyncio.create_task(checks.verdict("10.0.0.1", question("good")))
        compiler.go.set()

        assert await operator is None
        await asyncio.gather(first, waiting)

    run(scenario)


def test_when_the_queue_is_full_every_source_is_refused_at_once() -> None:
    async def scenario() -> None:
        compiler = Compiler()
        checks = PolicyChecks(compiler, waiting=2)
        held = []
        for n in range(3):  # the first is being compiled, two wait
            asked = checks.verdict(f"10.1.0.{n}", question(f"tenant-{n}"))
            held.append(asyncio.create_task(asked))
            await settled()

        with pytest.raises(ChecksBusy) as refused:
            await checks.verdict("10.0.0.1", question("good"))
        assert not refused.value.per_source
        compiler.go.set()
        await asyncio.gather(*held)

    run(scenario)


def test_a_compilation_that_fails_fails_its_reviews_and_is_not_kept() -> None:
    async def scenario() -> None:
        async def failing(asked: PolicyQuestion) -> Verdict:
            raise RuntimeError("worker gone")

        checks = PolicyChecks(failing)

        with pytest.raises(RuntimeError):
            await checks.verdict("10.0.0.1", question("good"))
        assert len(checks.verdicts) == 0

    run(scenario)


def test_the_verdict_cache_drops_the_least_recently_used_first() -> None:
    cache = VerdictCache(size=2)
    cache.put(b"a", None)
    cache.put(b"b", "broken")
    cache.get(b"a")
    cache.put(b"c", None)

    assert cache.get(b"b") == (False, None)
    assert cache.get(b"a") == (True, None)
    assert cache.get(b"c") == (True, None)
