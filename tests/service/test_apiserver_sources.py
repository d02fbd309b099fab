"""kube-apiserver's addresses kept current for the door (webhook/service/apiserver_sources.py):
learned at start, looked at again, and kept when a look fails."""

from __future__ import annotations

import asyncio

import pytest

from webhook.http.tls_gate import ApiserverSources
from webhook.service.apiserver_sources import keep_learning


def looks(*answers: list[str] | Exception) -> list[list[str] | Exception]:
    return list(answers)


def run_looks(sources: ApiserverSources, answers: list[list[str] | Exception], after: int) -> None:
    """Let `keep_learning` look `after` times, answering each look from `answers`."""
    seen: list[int] = []

    def read() -> list[str]:
        answer = answers[min(len(seen), len(answers) - 1)]
        seen.append(1)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def scenario() -> None:
        task = asyncio.create_task(keep_learning(sources, read, interval=0.01))
        while len(seen) < after:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(scenario(), 10))


def test_the_addresses_the_cluster_lists_are_learned_at_the_first_look() -> None:
    sources = ApiserverSources()

    run_looks(sources, looks(["10.0.0.10", "10.0.0.11"]), after=1)

    assert "10.0.0.10" in sources and "10.0.0.11" in sources


def test_a_later_look_replaces_what_was_learned() -> None:
    sources = ApiserverSources()

    run_looks(sources, looks(["10.0.0.10"], ["10.0.0.12"]), after=3)

    assert "10.0.0.12" in sources and "10.0.0.10" not in sources


def test_a_failed_look_keeps_what_the_last_one_found(caplog: pytest.LogCaptureFixture) -> None:
    sources = ApiserverSources(["192.168.0.0/16"])

    run_looks(sources, looks(["10.0.0.10"], RuntimeError("connection refused")), after=3)

    assert "10.0.0.10" in sources and "192.168.3.4" in sources
    assert any("last ones found are kept" in r.message for r in caplog.records)
