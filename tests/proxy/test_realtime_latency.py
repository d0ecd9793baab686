"""A delayed event of a realtime session arrives late without holding back the other direction, and the events
behind it in its own direction keep their order (mitmproxy's hooks block the connection: the event is
dropped and re-injected from a task). A small OpenAI-Realtime-speaking server timestamps what it receives."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from brownout.proxy.embed import ProxyHandle


class _Server:
    """On `go`: sends two deltas at once; records when each client message arrives."""

    def __init__(self) -> None:
        self.received: list[tuple[str, float]] = []

    def __call__(self, ws: ServerConnection) -> None:
        for raw in ws:
            doc = json.loads(raw)
            self.received.append((doc["type"], time.monotonic()))
            if doc["type"] == "go":
                for piece in ("one", "two"):
                    delta = {"type": "response.output_text.delta", "response_id": "r", "delta": piece}
                    ws.send(json.dumps(delta))
            elif doc["type"] == "ping":
                ws.send(json.dumps({"type": "pong"}))


@pytest.fixture
def server() -> Iterator[tuple[_Server, str]]:
    handler = _Server()
    with serve(handler, "127.0.0.1", 0) as srv:
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        yield handler, f"ws://127.0.0.1:{srv.socket.getsockname()[1]}/v1/realtime?model=gpt-realtime"
        srv.shutdown()
        thread.join(5)


def test_a_delayed_event_holds_back_only_its_own_direction(
    brownout_proxy: Callable[..., ProxyHandle], server: tuple[_Server, str]
) -> None:
    handler, url = server
    rule = (
        "{name: slow, match: {provider: openai_realtime, event: response.output_text.delta}, "
        "fault: {type: latency, delay_ms: 800}, schedule: {first: 1}}"
    )
    proxy = brownout_proxy(f"seed: 1\nrules:\n  - {rule}\n")
    with connect(url, proxy=proxy.url, open_timeout=10) as ws:
        start = time.monotonic()
        ws.send(json.dumps({"type": "go"}))
        time.sleep(0.1)
        ws.send(json.dumps({"type": "ping"}))  # client -> server flows while the delta waits
        got = [(json.loads(ws.recv(timeout=10)), time.monotonic()) for _ in range(3)]
    ping_at = dict(handler.received)["ping"]
    assert ping_at - start < 0.5  # the server had the ping long before the delayed delta reached the client
    kinds = [doc.get("delta", doc["type"]) for doc, _ in got]
    assert kinds == ["one", "two", "pong"]  # behind the delayed delta, its direction keeps its order
    assert got[0][1] - start >= 0.8  # the delay itself
    assert got[1][1] - got[0][1] < 0.2  # what waited behind it follows at once
    (record,) = [f for d in proxy.addon.engine.decisions.recent() if d.outcome == "fired" for f in [d]]
    assert record.rule == "slow"
