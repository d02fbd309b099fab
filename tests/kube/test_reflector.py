"""The pure parts of webhook.kube.reflector; the loop itself is tested against a real
kube-apiserver in tests/e2e/test_inventory.py."""

from __future__ import annotations

import json
import random
import socket

import pytest
import urllib3
from urllib3.exceptions import ProtocolError

from webhook.kube.api_errors import ApiException
from webhook.kube.reflector import Backoff, KindStatus, describe_error, split_lines

STREAM = b'{"type":"ADDED","object":{}}\n{"type":"BOOKMARK","object":{"x":"\xc3\xa9"}}\n\n{"a":1}\n'
LINES = [
    b'{"type":"ADDED","object":{}}',
    b'{"type":"BOOKMARK","object":{"x":"\xc3\xa9"}}',
    b'{"a":1}',
]


def test_split_lines_whole_stream() -> None:
    assert list(split_lines([STREAM])) == LINES


@pytest.mark.parametrize("cut", range(len(STREAM) + 1))
def test_split_lines_any_two_chunks(cut: int) -> None:
    assert list(split_lines([STREAM[:cut], STREAM[cut:]])) == LINES


def test_split_lines_byte_by_byte_and_empty_chunks() -> None:
    chunks = [STREAM[i : i + 1] for i in range(len(STREAM))]
    assert list(split_lines([b"", *chunks, b""])) == LINES


def test_split_lines_keeps_a_last_line_without_newline() -> None:
    assert list(split_lines([b"one\ntw", b"o"])) == [b"one", b"two"]
    assert list(split_lines([b"one\n  \n", b" "])) == [b"one"]
    assert list(split_lines([])) == []


def test_backoff_doubles_to_the_cap_with_jitter_in_the_upper_half() -> None:
    backoff = Backoff(0.5, 30.0, rng=random.Random(7))
    steps = [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    for step in steps:
        delay = backoff.next()
        assert step / 2 <= delay <= step
    backoff.reset()
    assert 0.25 <= backoff.next() <= 0.5


def test_backoff_delays_differ_between_replicas() -> None:
    assert Backoff(rng=random.Random(1)).next() != Backoff(rng=random.Random(2)).next()


@pytest.mark.parametrize(("initial", "cap"), [(0, 1), (-1, 1), (2, 1)])
def test_backoff_rejects_nonsense(initial: float, cap: float) -> None:
    with pytest.raises(ValueError, match="initial"):
        Backoff(initial, cap)


def test_describe_error_of_the_apiserver_uses_its_message() -> None:
    error = ApiException(status=410, reason="Gone")
    error.body = json.dumps({"kind": "Status", "message": "too old resource version: 1 (9)"})
    assert describe_error(error) == "410 Gone: too old resource version: 1 (9)"


def test_describe_error_of_a_refused_connection_is_short_and_stable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends: nothing listens

    def attempt(path: str) -> str:
        pool = urllib3.PoolManager(retries=urllib3.Retry(total=0))
        with pytest.raises(urllib3.exceptions.HTTPError) as caught:
            pool.request("GET", f"http://127.0.0.1:{port}{path}")
        return describe_error(caught.value)

    first = attempt("/api/v1/nodes?watch=1&resourceVersion=12")
    assert "Connection refused" in first
    assert "0x" not in first and "resourceVersion" not in first
    # Another attempt (another URL, another connection object) reads the same: logged once.
    assert attempt("/api/v1/nodes?watch=1&resourceVersion=13") == first


def test_describe_error_of_a_broken_stream_names_the_cause() -> None:
    error = ProtocolError("Connection broken", ConnectionResetError(104, "Connection reset"))
    assert describe_error(error) == (
        "Connection broken: ConnectionResetError: [Errno 104] Connection reset"
    )
    assert describe_error(ValueError("boom")) == "ValueError: boom"
    assert describe_error(TimeoutError()) == "TimeoutError: TimeoutError"


def kind_status(synced: bool, current_at: float | None) -> KindStatus:
    return KindStatus("nodes", synced, 0, current_at, None, int(synced), None)


def test_kind_status_age() -> None:
    assert kind_status(False, None).age() is None
    assert kind_status(True, 100.0).age(now=112.5) == 12.5
    assert kind_status(True, 100.0).age(now=99.0) == 0.0
