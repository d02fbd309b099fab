"""`webhook.http.tls_gate` on a real server over TLS: a source past its allowance of new
connections is closed before the handshake, others are served, and a handshake that
never comes is closed in time; on uvloop's loop (as served) and on asyncio's."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn
import uvloop

from tests.clock import ManualClock
from tests.http.live import KUBE_APISERVER, Live, exchange
from webhook.http.limits import EdgeLimits, guarded_protocol
from webhook.http.tls_gate import (
    NO_SOURCES,
    SOURCE_RATE,
    ApiserverSources,
    CutsLogged,
    SourceRate,
    gated_tls,
    source_network,
)
from webhook.tls.files import write_key_pair
from webhook.tls.pki import create_ca, issue_serving_certificate

TENANT = "127.0.0.2"
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


@pytest.fixture(scope="module")
def contexts(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """The server's TLS context and a client's that trusts it."""
    directory: Path = tmp_path_factory.mktemp("pki")
    ca = create_ca("tls gate test CA")
    ca_cert, _ = write_key_pair(directory, "ca", ca)
    issued = issue_serving_certificate(
        ca, "localhost", dns_names=["localhost"], ip_addresses=["127.0.0.1"]
    )
    cert, key = write_key_pair(directory, "tls", issued)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(ca_cert))


async def hello(scope: dict[str, object], receive: object, send: object) -> None:
    """Answers its scheme: https when TLS reached the app."""
    if scope["type"] != "http":
        return
    body = str(scope["scheme"]).encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


@asynccontextmanager
async def gated(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext],
    rate: SourceRate,
    refused: list[str],
    max_wait: float = 0.0,
    delayed: list[None] | None = None,
    apiserver: ApiserverSources = NO_SOURCES,
) -> AsyncIterator[Live]:
    server_context, client_context = contexts
    limits = EdgeLimits(handshake_seconds=0.5)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    gate = gated_tls(
        guarded_protocol(limits),
        server_context,
        rate,
        limits.handshake_seconds,
        refused.append,
        max_wait=max_wait,
        on_delayed=None if delayed is None else lambda: delayed.append(None),
        apiserver=apiserver,
    )
    config = uvicorn.Config(
        hello, http=gate, lifespan="off", log_config=None, timeout_graceful_shutdown=1
    )  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield Live(listener.getsockname()[1], server, client_context)
    finally:
        server.should_exit = True
        await task
        listener.close()


GET = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"


@pytest.mark.parametrize("loop", LOOPS)
def test_a_source_past_its_allowance_is_closed_before_the_handshake_and_others_are_served(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], loop: str
) -> None:
    async def scenario() -> None:
        refused: list[str] = []
        async with gated(contexts, SourceRate(per_second=0.01, burst=3), refused) as server:
            for _ in range(3):
                assert await exchange(await server.connect(TENANT), GET) == (200, b"https")

            with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError)):
                await server.connect(TENANT)
            assert await exchange(await server.connect(KUBE_APISERVER), GET) == (200, b"https")
            assert refused == [SOURCE_RATE]

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize("loop", LOOPS)
def test_connections_past_the_burst_wait_for_their_turn_and_are_served_not_cut(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], loop: str
) -> None:
    """Every tenant's review comes from kube-apiserver's one address: a burst of its
    connections is slowed down to the pace, not cut."""

    async def scenario() -> None:
        refused: list[str] = []
        delayed: list[None] = []
        rate = SourceRate(per_second=10, burst=2)
        async with gated(contexts, rate, refused, max_wait=1.0, delayed=delayed) as server:
            started = time.monotonic()

            async def one() -> tuple[int, bytes]:
                return await exchange(await server.connect(KUBE_APISERVER), GET)

            answers = await asyncio.gather(*(one() for _ in range(8)))
            took = time.monotonic() - started

        assert answers == [(200, b"https")] * 8
        assert refused == []
        assert len(delayed) == 6
        assert took >= 0.5  # six turns at ten a second

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_connection_that_would_wait_past_the_bound_is_cut_and_a_gone_one_gives_its_turn_up(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], loop: str
) -> None:
    async def scenario() -> None:
        refused: list[str] = []
        rate = SourceRate(per_second=2, burst=1)
        async with gated(contexts, rate, refused, max_wait=0.6) as server:
            first = await server.connect(TENANT)
            # Waits 0.5 s for its turn, and goes away before it comes.
            _, gone = await asyncio.open_connection(
                "127.0.0.1", server.port, local_addr=(TENANT, 0)
            )
            gone.close()
            with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError)):
                await server.connect(TENANT)  # its turn would be 1 s away
            served = await exchange(first, GET)
            await asyncio.sleep(0.7)  # the gone one's turn passes unused
            again = await exchange(await server.connect(KUBE_APISERVER), GET)

        assert served == again == (200, b"https")
        assert refused == [SOURCE_RATE]

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize("loop", LOOPS)
def test_a_connection_that_never_starts_its_handshake_is_closed_in_time(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], loop: str
) -> None:
    async def scenario() -> None:
        async with gated(contexts, SourceRate(per_second=10, burst=10), []) as server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)

            assert await asyncio.wait_for(reader.read(), 5) == b""
            writer.close()

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(asyncio.wait_for(scenario(), 30))


def test_a_source_gets_its_burst_at_once_then_its_rate() -> None:
    clock = ManualClock()
    rate = SourceRate(per_second=2, burst=3, clock=clock)

    assert [rate.admit("a") for _ in range(4)] == [True, True, True, False]
    assert rate.admit("b")
    clock.now = 0.5
    assert [rate.admit("a") for _ in range(2)] == [True, False]


def test_a_reservation_past_the_burst_waits_a_turn_more_each_and_none_past_the_bound() -> None:
    clock = ManualClock()
    rate = SourceRate(per_second=4, burst=2, clock=clock)

    waits = [rate.reserve("a", max_wait=0.5) for _ in range(5)]

    assert waits == [0.0, 0.0, 0.25, 0.5, None]
    clock.now = 1.0  # four tokens more: the two reserved ahead are paid back first
    assert [rate.reserve("a", max_wait=0.0) for _ in range(3)] == [0.0, 0.0, None]


def test_sources_whose_bucket_is_full_again_are_forgotten_past_the_table_size() -> None:
    clock = ManualClock()
    rate = SourceRate(per_second=1, burst=2, max_sources=2, clock=clock)
    rate.admit("a")
    clock.now = 10.0
    rate.admit("b")

    assert rate.admit("c")
    assert len(rate) == 2  # "a" forgotten: its bucket was full again


@pytest.mark.parametrize("loop", LOOPS)
def test_kube_apiservers_new_connections_are_never_paced_or_cut(
    contexts: tuple[ssl.SSLContext, ssl.SSLContext], loop: str
) -> None:
    """Its connections carry every tenant's reviews: a cut would fail a tenant that did
    not spend the allowance. Another source with the same allowance is cut."""

    async def scenario() -> None:
        refused: list[str] = []
        apiserver = ApiserverSources([f"{KUBE_APISERVER}/32"])
        rate = SourceRate(per_second=0.01, burst=1)
        async with gated(contexts, rate, refused, apiserver=apiserver) as server:
            for _ in range(5):
                assert await exchange(await server.connect(KUBE_APISERVER), GET) == (200, b"https")
            assert await exchange(await server.connect(TENANT), GET) == (200, b"https")
            with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError)):
                await server.connect(TENANT)
            assert refused == [SOURCE_RATE]

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(asyncio.wait_for(scenario(), 30))


def test_kube_apiservers_sources_are_those_given_and_those_learned() -> None:
    sources = ApiserverSources(["10.0.0.0/24", "fd00::1"])
    sources.learn(["192.168.1.10", "not-an-address"])

    assert "10.0.0.7" in sources and "fd00::1" in sources and "192.168.1.10" in sources
    assert "::ffff:10.0.0.7" in sources
    assert "10.0.1.7" not in sources and "not-an-address" not in sources
    sources.learn([])
    assert "192.168.1.10" not in sources


def test_a_source_that_is_no_address_is_refused_with_what_was_given() -> None:
    with pytest.raises(ValueError, match=re.escape("'10.0.0.300' is not an IP address or CIDR")):
        source_network("10.0.0.300")


def test_a_cut_is_logged_once_a_minute_per_source(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    cuts = CutsLogged(max_sources=2, clock=clock)

    for source in ("10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.3"):
        cuts.note(source)
    clock.now += 61
    cuts.note("10.0.0.1")

    logged = [r.source for r in caplog.records if "cut for rate" in r.message]  # type: ignore[attr-defined]
    assert logged == ["10.0.0.1", "10.0.0.2", "10.0.0.1"]
