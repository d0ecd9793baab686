"""An MCP client may close a reply's SSE stream once it has its answer, before the server ends the stream:
that is no connection error. A stream closed before the answer came still is one."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from brownout.core.exchange import Exchange
from brownout.proxy.embed import ProxyHandle

REPLY = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}


class _Slow(BaseHTTPRequestHandler):
    """Answers a POST with one SSE event, then keeps the stream open until the other side hangs up."""

    protocol_version = "HTTP/1.1"
    first_event: dict[str, Any] = REPLY

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        event = f"event: message\ndata: {json.dumps(self.first_event)}\n\n".encode()
        self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()
        self.connection.settimeout(10)
        with contextlib.suppress(OSError):
            self.rfile.read(1)  # returns once the proxy closes its side

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _server(first_event: dict[str, Any]) -> Iterator[str]:
    handler = type("Handler", (_Slow,), {"first_event": first_event})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


def _hang_up_after_first_event(proxy: ProxyHandle, url: str) -> str:
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"accept": "application/json, text/event-stream"}
    with httpx.Client(proxy=proxy.url, timeout=10) as client:
        with client.stream("POST", url, json=request, headers=headers) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    return line  # and close the response: the connection goes with it
    raise AssertionError("no event")


@pytest.mark.parametrize(("first_event", "error_type"), [(REPLY, None), (PROGRESS, "connection")])
def test_hanging_up_after_the_answer_is_no_connection_error(
    brownout_proxy: Callable[..., ProxyHandle], first_event: dict[str, Any], error_type: str | None
) -> None:
    done: list[Exchange] = []
    proxy = brownout_proxy(on_exchange=done.append)
    with _server(first_event) as url:
        assert json.loads(_hang_up_after_first_event(proxy, url)[5:]) == first_event
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            time.sleep(0.02)
    (ex,) = done
    assert (ex.provider, ex.operation, ex.status) == ("mcp", "tools/list", 200)
    assert ex.error_type == error_type and ex.stream_complete is (error_type is None)
