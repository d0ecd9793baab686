"""A burst of new connections through the real proxy: every one is served, admitted a few per loop
iteration (`proxy.admit_per_tick`), and the wait shows in brownout_client_connection_wait_seconds."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

BODY = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode()


def sample(proxy: Any, name: str) -> float:
    return proxy.addon.pipeline.exporters.metrics.registry.get_sample_value(name) or 0.0


@contextmanager
def loop_busy(proxy: Any, seconds: float) -> Iterator[None]:
    """The proxy's event loop kept busy: connections made meanwhile wait in the listen backlog and are
    accepted together when it turns over (as under a real burst)."""
    started = threading.Event()

    def hog() -> None:
        started.set()
        time.sleep(seconds)

    proxy.addon.on_loop.loop.call_soon_threadsafe(hog)
    assert started.wait(5)
    yield


def status_of(sock: socket.socket) -> int:
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0


def burst(proxy: Any, n: int) -> list[int]:
    """n connections, each sending one chat request, all while the loop is busy; their statuses."""
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
    )
    with loop_busy(proxy, 0.5):
        socks = [socket.create_connection((proxy.host, proxy.port), timeout=20) for _ in range(n)]
        for s in socks:
            s.sendall(request)
    try:
        return [status_of(s) for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.mark.timeout(60)
def test_a_burst_is_served_and_its_wait_is_measured(upstream: Any, brownout_proxy: Any) -> None:
    proxy = brownout_proxy("proxy: {admit_per_tick: 1}\n", mode="reverse", upstream=upstream)
    assert burst(proxy, 20) == [200] * 20
    waited = sample(proxy, "brownout_client_connection_wait_seconds_count")
    assert waited >= 15  # accepted together, started one per iteration: all but about the first waited
    assert sample(proxy, "brownout_client_connection_wait_seconds_sum") > 0
    assert sample(proxy, "brownout_client_connections_waiting") == 0


@pytest.mark.timeout(60)
def test_with_admission_off_nothing_waits(upstream: Any, brownout_proxy: Any) -> None:
    proxy = brownout_proxy("proxy: {admit_per_tick: 0}\n", mode="reverse", upstream=upstream)
    assert burst(proxy, 20) == [200] * 20
    assert sample(proxy, "brownout_client_connection_wait_seconds_count") == 0
