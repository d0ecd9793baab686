"""brownout's close path (proxy/wsclose.py, mitmproxy 12.2 internals): the client gets the chosen code and reason,
the upstream the same close, also while the client is sending; the session records who closed it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.server import ServerConnection, serve

from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import Recorder, wait_for


class _Server:
    """Speaks just enough OpenAI Realtime: a delta for every `go`; remembers how it was closed."""

    def __init__(self) -> None:
        self.closed: list[tuple[int | None, str | None]] = []

    def __call__(self, ws: ServerConnection) -> None:
        try:
            for raw in ws:
                if json.loads(raw)["type"] == "go":
                    ws.send(json.dumps({"type": "response.output_text.delta", "response_id": "r", "delta": "x"}))
        except ConnectionClosed:
            pass
        rcvd = ws.protocol.close_rcvd
        self.closed.append((rcvd.code, rcvd.reason) if rcvd else (None, None))


@pytest.fixture
def server() -> Iterator[tuple[_Server, str]]:
    handler = _Server()
    with serve(handler, "127.0.0.1", 0) as srv:
        thread = threading.Thread(target=srv.serve_forever, daemon=True)
        thread.start()
        yield handler, f"ws://127.0.0.1:{srv.socket.getsockname()[1]}/v1/realtime?model=m"
        srv.shutdown()
        thread.join(5)


RULE = (
    "{name: bye, match: {provider: openai_realtime, event: response.output_text.delta}, "
    "fault: {type: close, code: 4321, reason: chaos says bye, warning: false}}"
)


@pytest.mark.parametrize("client_keeps_sending", [False, True])
def test_the_client_and_the_upstream_get_brownouts_close_code(
    brownout_proxy: Callable[..., ProxyHandle], server: tuple[_Server, str], client_keeps_sending: bool
) -> None:
    handler, url = server
    proxy = brownout_proxy(f"seed: 1\nrules:\n  - {RULE}\n")
    rec = Recorder(proxy)
    with connect(url, proxy=proxy.url, open_timeout=10, close_timeout=2) as ws:
        ws.send(json.dumps({"type": "go"}))
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                if client_keeps_sending:  # the close crosses messages the client is sending at that moment
                    ws.send(json.dumps({"type": "noise"}))
                ws.recv(timeout=5)
        assert time.monotonic() - started < 2  # the close arrived; no timeout ended the connection
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4321, "chaos says bye")
    assert wait_for(lambda: handler.closed) and handler.closed[0] == (4321, "chaos says bye")
    assert wait_for(lambda: rec.sessions())
    info: Any = rec.sessions()[0].realtime
    assert (info.close_code, info.closed_by) == (4321, "brownout")


def test_over_tls_a_message_sent_as_the_close_crosses_it_does_not_keep_the_connection_open(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any
) -> None:
    """The client answers response.done with its next request just as the close goes out (the SDK's loop does):
    mitmproxy's own close command can then go unheard for the client's connection, so brownout ends it after
    the close frame."""
    rule = "{name: cap, match: {provider: openai_realtime, event: response.done}, fault: {type: close}}"
    proxy = brownout_proxy(f"seed: 1\nrules:\n  - {rule}\n", upstream=upstream_tls)
    ssl = __import__("ssl").create_default_context(cafile=str(proxy.ca_bundle_path))
    url = upstream_tls.url.replace("https://", "wss://") + "/v1/realtime?model=m"
    for _ in range(3):
        with connect(url, proxy=proxy.url, ssl=ssl, open_timeout=10, close_timeout=5) as ws:
            ws.send(json.dumps({"type": "response.create"}))
            started = time.monotonic()
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    if json.loads(ws.recv(timeout=8))["type"] == "response.done":
                        ws.send(json.dumps({"type": "response.create"}))
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
        assert time.monotonic() - started < 3


def test_a_client_sending_without_pause_still_reads_the_close_frame(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any
) -> None:
    """A real server ends the closing handshake (RFC 6455 7.1.1): it reads what the client still sends. Were the
    connection closed the moment the close frame went out, the client's next message would meet an RST that
    drops the close frame unread, and the SDK would report 1006 instead of the provider's 1001."""
    rule = "{name: cap, match: {provider: openai_realtime, event: response.done}, fault: {type: close}}"
    proxy = brownout_proxy(f"seed: 1\nrules:\n  - {rule}\n", upstream=upstream_tls)
    ssl = __import__("ssl").create_default_context(cafile=str(proxy.ca_bundle_path))
    url = upstream_tls.url.replace("https://", "wss://") + "/v1/realtime?model=m"
    codes = []
    for _ in range(5):
        with connect(url, proxy=proxy.url, ssl=ssl, open_timeout=10, close_timeout=5) as ws:
            stop = threading.Event()

            def chatter(ws: Any = ws, stop: threading.Event = stop) -> None:
                noise = json.dumps({"type": "input_audio_buffer.append", "audio": "AAAA" * 64})
                try:
                    while not stop.is_set():
                        ws.send(noise)
                        time.sleep(0.0005)
                except ConnectionClosed:
                    pass

            ws.send(json.dumps({"type": "response.create"}))
            sender = threading.Thread(target=chatter, daemon=True)
            sender.start()
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    ws.recv(timeout=8)
            stop.set()
            sender.join(5)
        codes.append(closed.value.rcvd.code if closed.value.rcvd is not None else 1006)
    assert codes == [1001] * 5
