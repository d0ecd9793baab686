"""Client connections are bounded: slow request headers (slowloris) and idle keep-alive connections are
closed at their bound, never a request in flight; connections over the cap are answered 503.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**CHAT, "stream": True}


def cut_count(proxy: Any, reason: str) -> float:
    registry = proxy.addon.pipeline.exporters.metrics.registry
    return registry.get_sample_value("brownout_client_connections_cut_total", {"reason": reason}) or 0.0


def wait_closed(socks: list[socket.socket], started: float, deadline_s: float, trickle: bool) -> dict[int, float]:
    """Seconds from `started` until the proxy closed each socket; `trickle` sends a header byte every 0.2 s
    (enough to keep mitmproxy's inactivity timeout from ever firing)."""
    closed: dict[int, float] = {}
    last = 0.0
    while len(closed) < len(socks) and time.monotonic() - started < deadline_s:
        live = [s for i, s in enumerate(socks) if i not in closed]
        readable, _, _ = select.select(live, [], [], 0.05)
        for s in readable:
            try:
                eof = s.recv(4096) == b""
            except ConnectionError:
                eof = True
            if eof:
                closed[socks.index(s)] = time.monotonic() - started
        if trickle and time.monotonic() - last > 0.2:
            last = time.monotonic()
            for s in live:
                try:
                    s.sendall(b"X")
                except OSError:
                    pass  # closed under us: the next select sees it
    return closed


@contextmanager
def steady_traffic(url: str) -> Iterator[list[int]]:
    """Ordinary requests, one after the other, while the block runs; yields their statuses."""
    statuses: list[int] = []
    stop = threading.Event()

    def run() -> None:
        with httpx.Client(base_url=url, trust_env=False, timeout=10) as client:
            while not stop.is_set():
                statuses.append(client.post("/v1/chat/completions", json=CHAT).status_code)
                time.sleep(0.05)

    t = threading.Thread(target=run)
    t.start()
    try:
        yield statuses
    finally:
        stop.set()
        t.join(15)


@pytest.mark.timeout(60)
def test_slow_request_headers_are_cut_at_the_bound_while_other_traffic_flows(upstream: Any, brownout_proxy: Any):
    proxy = brownout_proxy("proxy: {request_header_timeout_s: 1}\n", mode="reverse", upstream=upstream)
    with steady_traffic(proxy.url) as statuses:
        socks = [socket.create_connection((proxy.host, proxy.port)) for _ in range(50)]
        started = time.monotonic()
        for s in socks:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nX-Slow: ")
        closed = wait_closed(socks, started, deadline_s=8, trickle=True)
        for s in socks:
            s.close()
    assert len(closed) == 50, f"{50 - len(closed)} slow clients still connected after 8 s"
    # Cut at the bound: not before it, and not much after (generous: the machine is shared).
    assert min(closed.values()) >= 0.9 and max(closed.values()) < 4.0, sorted(closed.values())
    assert statuses and set(statuses) == {200}, statuses
    assert cut_count(proxy, "request_header_timeout") == 50


@pytest.mark.timeout(60)
def test_an_idle_keep_alive_connection_is_closed_but_never_a_slow_stream(upstream: Any, brownout_proxy: Any):
    proxy = brownout_proxy("proxy: {client_idle_timeout_s: 1}\n", mode="reverse", upstream=upstream)
    idle = socket.create_connection((proxy.host, proxy.port))
    body = json.dumps(CHAT).encode()
    idle.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    assert idle.recv(65536).startswith(b"HTTP/1.1 200")
    answered = time.monotonic()
    streamed: list[bytes] = []

    def stream() -> None:  # meanwhile, chunks further apart than the idle bound: it runs to its end
        with httpx.Client(base_url=proxy.url, trust_env=False, timeout=20) as client:
            headers = {"x-mock-chunks": "3", "x-mock-chunk-delay-ms": "1500"}
            with client.stream("POST", "/v1/chat/completions", json=STREAM, headers=headers) as r:
                streamed.append(b"".join(r.iter_raw()))

    t = threading.Thread(target=stream)
    t.start()
    closed = wait_closed([idle], answered, deadline_s=8, trickle=False)
    idle.close()
    t.join(20)
    assert 0 in closed and 0.9 <= closed[0] < 4.0, closed
    assert streamed and streamed[0].rstrip().endswith(b"data: [DONE]"), streamed
    assert cut_count(proxy, "client_idle_timeout") == 1


@pytest.mark.timeout(60)
def test_the_connection_cap_holds_under_a_burst(upstream: Any, brownout_proxy: Any):
    cap = 8
    proxy = brownout_proxy(f"proxy: {{max_client_connections: {cap}}}\n", mode="reverse", upstream=upstream)
    flowing = threading.Barrier(cap + 1, timeout=20)
    streams: list[bytes] = []

    def hold() -> None:  # a stream of about 3 s: its connection is served all along
        with httpx.Client(base_url=proxy.url, trust_env=False, timeout=20) as client:
            headers = {"x-mock-chunks": "10", "x-mock-chunk-delay-ms": "300"}
            with client.stream("POST", "/v1/chat/completions", json=STREAM, headers=headers) as r:
                it = r.iter_raw()
                first = next(it)
                flowing.wait()
                streams.append(first + b"".join(it))

    holders = [threading.Thread(target=hold) for _ in range(cap)]
    for t in holders:
        t.start()
    flowing.wait()
    burst: list[httpx.Response] = []

    def knock() -> None:
        with httpx.Client(base_url=proxy.url, trust_env=False, timeout=10) as client:
            burst.append(client.post("/v1/chat/completions", json=CHAT))

    knockers = [threading.Thread(target=knock) for _ in range(40)]
    for t in knockers:
        t.start()
    for t in knockers:
        t.join(15)
    for t in holders:
        t.join(20)
    assert len(streams) == cap and all(s.rstrip().endswith(b"data: [DONE]") for s in streams)
    assert len(burst) == 40 and {r.status_code for r in burst} == {503}, [r.status_code for r in burst]
    answer = burst[0]
    assert answer.headers["x-brownout-error"] == "max_client_connections" and answer.headers["retry-after"] == "1"
    assert answer.headers["connection"] == "close"
    assert "max_client_connections" in answer.json()["error"]["message"]
    assert cut_count(proxy, "max_client_connections") == 40
    # Below the cap again: served as usual.
    with httpx.Client(base_url=proxy.url, trust_env=False) as client:
        assert client.post("/v1/chat/completions", json=CHAT).status_code == 200


@pytest.mark.timeout(60)
def test_a_connect_tunnel_over_the_cap_is_answered_503(upstream_tls: Any, brownout_proxy: Any):
    proxy = brownout_proxy("proxy: {max_client_connections: 1}\n", upstream=upstream_tls)
    holder = socket.create_connection((proxy.host, proxy.port))  # takes the one place
    try:
        time.sleep(0.2)
        verify = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
        with httpx.Client(proxy=proxy.proxy_url(), verify=verify, trust_env=False) as client:
            with pytest.raises(httpx.ProxyError, match="503"):
                client.post(f"{upstream_tls.url}/v1/chat/completions", json=CHAT)
    finally:
        holder.close()
    assert cut_count(proxy, "max_client_connections") == 1


@pytest.mark.timeout(60)
def test_ctl_status_names_connection_counts_as_counts_of_now(upstream: Any, brownout_proxy: Any):
    from click.testing import CliRunner

    from brownout.proxy.ctl import ctl

    config = "proxy: {max_client_connections: 1}\ncontrol: {token: st4tus-token}\n"
    proxy = brownout_proxy(config, mode="reverse", upstream=upstream)
    control = ["--url", proxy.addon.control.url, "--token", "st4tus-token", "status"]

    def connections() -> dict[str, Any]:
        result = CliRunner().invoke(ctl, control)
        assert result.exit_code == 0, result.output
        counts: dict[str, Any] = json.loads(result.output)["client_connections"]
        return counts

    with httpx.Client(base_url=proxy.url, trust_env=False) as client:  # one finished exchange, connection closed
        assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    deadline = time.monotonic() + 10
    while connections()["open_now"] and time.monotonic() < deadline:  # its close reaches the proxy first
        time.sleep(0.05)
    assert connections() == {"open_now": 0, "over_cap_now": 0, "max_open": 1}
    held = [socket.create_connection((proxy.host, proxy.port)) for _ in range(2)]  # the second is over the cap
    while connections()["open_now"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections() == {"open_now": 2, "over_cap_now": 1, "max_open": 1}
    for s in held:
        s.close()
    while connections()["open_now"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections() == {"open_now": 0, "over_cap_now": 0, "max_open": 1}  # of now, not totals since start
