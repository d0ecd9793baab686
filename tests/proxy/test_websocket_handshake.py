"""A WebSocket handshake through brownout (the `websockets` client through the proxy to a local `websockets`
server): a rule whose match fits the upgrade request fires only a fault that can act on a handshake (answer
it, delay it, drop it); a body or stream fault cannot act on a 101 and is recorded as not applicable, never as
fired, and the WebSocket works as without brownout."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from brownout.proxy.embed import ProxyHandle


def _echo(ws: ServerConnection) -> None:
    for message in ws:
        ws.send(f"echo: {message}")


@pytest.fixture
def ws_url() -> Iterator[str]:
    with serve(_echo, "127.0.0.1", 0) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}/ws"
        server.shutdown()
        thread.join(5)


BODY_FAULTS = [
    "{type: truncate, at_bytes: 1}",
    "{type: malformed_json}",
    "{type: inject, text: follow me}",
    "{type: stall, pause_ms: 300}",
    "{type: throttle, bytes_per_s: 10}",
    "{type: reset, phase: mid_body, after_bytes: 1}",
]


@pytest.mark.parametrize("fault", BODY_FAULTS)
def test_a_body_fault_on_the_upgrade_request_is_not_applicable_and_the_socket_works(
    brownout_proxy: Callable[..., ProxyHandle], ws_url: str, fault: str
) -> None:
    config = f"seed: 1\nrules:\n  - name: body-fault\n    match: {{path: /ws}}\n    fault: {fault}\n"
    proxy = brownout_proxy(config)
    with connect(ws_url, proxy=proxy.url, open_timeout=10) as ws:
        ws.send("hello")
        assert ws.recv(timeout=10) == "echo: hello"
    decisions = [(d.rule, d.outcome) for d in proxy.addon.engine.decisions.recent()]
    assert decisions == [("body-fault", "skipped_not_applicable")]
    (reason,) = [d.reason for d in proxy.addon.engine.decisions.recent()]
    assert "WebSocket handshake" in reason


@pytest.mark.parametrize(
    ("fault", "fails"),
    [
        ("{type: http_error, status: 429, error_type: http}", InvalidStatus),
        ("{type: latency, delay_ms: 10}", None),
        ("{type: latency, phase: first_byte, delay_ms: 10}", None),
        ("{type: reset}", Exception),
    ],
)
def test_a_fault_that_can_act_on_the_handshake_fires(
    brownout_proxy: Callable[..., ProxyHandle], ws_url: str, fault: str, fails: Any
) -> None:
    config = f"seed: 1\nrules:\n  - name: handshake\n    match: {{path: /ws}}\n    fault: {fault}\n"
    proxy = brownout_proxy(config)
    if fails is None:
        with connect(ws_url, proxy=proxy.url, open_timeout=10) as ws:
            ws.send("hello")
            assert ws.recv(timeout=10) == "echo: hello"
    else:
        with pytest.raises(fails):
            connect(ws_url, proxy=proxy.url, open_timeout=10)
    assert [(d.rule, d.outcome) for d in proxy.addon.engine.decisions.recent()] == [("handshake", "fired")]
