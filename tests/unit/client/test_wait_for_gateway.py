"""wait_for_gateway (strand/client/channel.py), which every CLI command that connects
runs first: connected or not within its time, the retry said once, and nothing left
behind. It once watched the channel through gRPC's polling thread, which raised
"Channel closed!" on stderr when the channel was closed while it polled."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from strand.client.channel import wait_for_gateway
from strand.launcher import free_port


@pytest.fixture
def listening() -> Iterator[str]:
    """A gRPC server with no services: enough for a connection to come up."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


def test_a_listening_gateway_is_connected_without_a_retry(listening: str) -> None:
    retries: list[None] = []
    assert wait_for_gateway(listening, 10, lambda: retries.append(None))
    assert retries == []


def test_nothing_listening_says_retrying_once_and_gives_up_in_time() -> None:
    retries: list[None] = []
    start = time.monotonic()
    assert not wait_for_gateway(f"127.0.0.1:{free_port()}", 1.5,
                                lambda: retries.append(None))
    assert retries == [None]  # several attempts fail in 1.5 s; it is said once
    assert time.monotonic() - start < 5


def test_no_thread_it_starts_outlives_it_and_none_raises(
        listening: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race cannot be forced from here (it took a loaded machine, a few runs in a
    hundred): this checks, over a run of calls, that no thread the call starts is
    still running once it returns, and that none raised."""
    raised: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def recorded(thread: threading.Thread) -> None:
        started.append(thread)
        start(thread)

    for _ in range(20):
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", recorded)
            assert wait_for_gateway(listening, 10)
        assert [t.name for t in started if t.is_alive()] == []
    time.sleep(0.5)  # such a thread polls every 0.2 s
    assert raised == []
