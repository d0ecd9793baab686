"""A client may close an event stream once it has its answer, before the server ends the stream: an MCP
client after the JSON-RPC reply, an LLM SDK after the terminal event (`data: [DONE]`). That is no
connection error. A stream closed before the answer came still is one."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from brownout.core.exchange import Exchange
from brownout.proxy.embed import ProxyHandle
from tests.threadserver import serving_handler

REPLY = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "gpt-4o-mini",
    "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
}


def _mcp_event(message: dict[str, Any]) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


def _chat_events(done: bool) -> bytes:
    return f"data: {json.dumps(CHUNK)}\n\n".encode() + (b"data: [DONE]\n\n" if done else b"")


class _Slow(BaseHTTPRequestHandler):
    """Answers a POST with some SSE events, then keeps the stream open until the other side hangs up."""

    protocol_version = "HTTP/1.1"
    events: bytes = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        event = self.events
        self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()
        self.connection.settimeout(10)
        with contextlib.suppress(OSError):
            self.rfile.read(1)  # returns once the proxy closes its side

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _server(events: bytes, path: str = "/mcp") -> Iterator[str]:
    with serving_handler(type("Handler", (_Slow,), {"events": events})) as url:
        yield url + path


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
    with _server(_mcp_event(first_event)) as url:
        assert json.loads(_hang_up_after_first_event(proxy, url)[5:]) == first_event
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            time.sleep(0.02)
    (ex,) = done
    assert (ex.provider, ex.operation, ex.status) == ("mcp", "tools/list", 200)
    assert ex.error_type == error_type and ex.stream_complete is (error_type is None)


@pytest.mark.parametrize(("done", "error_type"), [(True, None), (False, "connection")])
def test_an_sdk_hanging_up_after_the_terminal_event_is_no_connection_error(
    brownout_proxy: Callable[..., ProxyHandle], openai_client: Callable[..., Any], done: bool, error_type: str | None
) -> None:
    """The openai SDK stops reading at `data: [DONE]` and closes the response; a server that ends the
    stream a moment later has answered in full. Without the terminal event the stream is cut."""
    finished: list[Exchange] = []
    proxy = brownout_proxy(on_exchange=finished.append)
    with _server(_chat_events(done), "/v1/chat/completions") as url:
        client = openai_client(proxy, url.removesuffix("/v1/chat/completions"), timeout=5)
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        with stream:
            first = next(iter(stream))
            assert first.choices[0].delta.content == "hi"
            if done:
                assert list(stream) == []  # the SDK saw [DONE] and stopped
        deadline = time.monotonic() + 10
        while not finished and time.monotonic() < deadline:
            time.sleep(0.02)
    (ex,) = finished
    assert (ex.provider, ex.status) == ("openai", 200)
    assert ex.error_type == error_type and ex.stream_complete is done
