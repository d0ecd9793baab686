"""A fast in-process mock of LLM providers (OpenAI, Anthropic, Gemini, Ollama, Bedrock), MCP and a JSON tool API,
and the realtime WebSocket APIs (OpenAI Realtime at /v1/realtime, Gemini Live at /ws/...BidiGenerateContent).

Run standalone: `python -m brownout.proxy.demo.upstream [--port N] [--tls] [--no-record]`; it prints
`LISTENING <port>` (and `CA <path>` with --tls) once bound.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from brownout.proxy.demo import (
    anthropic_mock,
    bedrock_mock,
    gemini_live_mock,
    gemini_ollama_mock,
    openai_mock,
    openai_realtime_mock,
    tools_mock,
)
from brownout.proxy.demo.httpserver import HttpServer, Request, Responder
from brownout.proxy.demo.mockdata import Knobs, dumps
from brownout.proxy.demo.tlsgen import make_tls_files, server_ssl_context

__all__ = ["MockUpstream", "SeenRequest", "main"]

log = logging.getLogger(__name__)

_PING_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nserver: brownout-mock\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(tools_mock.PING_BODY), tools_mock.PING_BODY)
)


class SeenRequest(NamedTuple):
    """A request as it arrived at the mock (header names lower-case)."""

    method: str
    path: str  # path and query
    headers: dict[str, str]
    body: bytes


class MockUpstream:
    """A mock LLM + tool upstream on an asyncio loop, plain HTTP or TLS with its own CA."""

    def __init__(self, *, record: bool = True, max_seen: int = 10_000) -> None:
        self.record = record
        self.max_seen = max_seen
        self.requests_seen: list[SeenRequest] = []
        self.port = 0
        self.url = ""
        self.ca_pem_path: str | None = None
        self._server = HttpServer(self._dispatch)
        self._tmpdir: str | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0, tls: bool = False) -> None:
        ctx = None
        if tls:
            self._tmpdir = tempfile.mkdtemp(prefix="brownout-mock-tls-")
            files = make_tls_files(Path(self._tmpdir))
            self.ca_pem_path = str(files.ca_pem)
            ctx = server_ssl_context(files)
        self.port = await self._server.start(host, port, ctx)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if tls else 'http'}://{shown}:{self.port}"
        log.debug("mock upstream listening on %s", self.url)

    async def stop(self) -> None:
        await self._server.stop()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    @classmethod
    @contextmanager
    def run_in_thread(
        cls, tls: bool = False, host: str = "127.0.0.1", port: int = 0, **kwargs: bool | int
    ) -> Iterator[MockUpstream]:
        """Serve from a background thread's event loop; for synchronous code such as pytest."""
        upstream = cls(**kwargs)  # type: ignore[arg-type]
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="brownout-mock-upstream", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(upstream.start(host, port, tls), loop).result(30)
            yield upstream
        finally:
            try:
                asyncio.run_coroutine_threadsafe(upstream.stop(), loop).result(10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join(10)
                loop.close()

    def _remember(self, req: Request) -> None:
        seen = self.requests_seen
        seen.append(SeenRequest(req.method, req.target, req.headers, req.body))
        # Trim in batches so the cap costs O(1) amortised per request.
        if len(seen) > self.max_seen + 1000:
            del seen[: len(seen) - self.max_seen]

    async def _dispatch(self, req: Request, resp: Responder) -> None:
        path = req.path
        if path == "/ping":  # the benchmark's hot path: pre-built bytes, nothing else
            if self.record:
                self._remember(req)
            resp.send_raw(_PING_RESPONSE)
            return
        if self.record:
            self._remember(req)
        knobs = Knobs.from_request(req)
        if knobs.status and knobs.status >= 400:
            if bedrock_mock.PATH.match(path):
                headers, body = bedrock_mock.bedrock_error(knobs.status)
                resp.send(knobs.status, body, headers=headers)
                return
            resp.send(knobs.status, _error_body(path, knobs.status), headers=_error_headers(knobs.status))
            return
        method = req.method
        try:
            if method == "GET" and path == "/v1/realtime":
                await openai_realtime_mock.realtime(req, resp, knobs)
            elif method == "GET" and path.endswith("GenerativeService.BidiGenerateContent"):
                await gemini_live_mock.live(req, resp, knobs)
            elif method == "POST" and path == "/v1/chat/completions":
                await openai_mock.chat_completions(req.body, resp, knobs)
            elif method == "POST" and path == "/v1/responses":
                await openai_mock.responses(req.body, resp, knobs)
            elif method == "POST" and path == "/v1/embeddings":
                openai_mock.embeddings(req.body, resp, knobs)
            elif method == "POST" and path == "/v1/messages":
                await anthropic_mock.messages(req.body, resp, knobs)
            elif (
                method == "POST"
                and path.startswith("/v1beta/models/")
                and (path.endswith((":generateContent", ":streamGenerateContent")))
            ):
                await gemini_ollama_mock.gemini(path, req.query, req.body, resp, knobs)
            elif method == "POST" and bedrock_mock.PATH.match(path):
                await bedrock_mock.bedrock(path, req.body, resp, knobs)
            elif method == "POST" and path == "/api/chat":
                await gemini_ollama_mock.ollama_chat(req.body, resp, knobs)
            elif method == "POST" and path == "/mcp":
                await tools_mock.mcp(req.body, req.headers, resp, knobs)
            elif path == "/tools/weather":
                tools_mock.weather(req.query, resp, knobs)
            elif path == "/tools/search":
                tools_mock.search(req.query, resp, knobs)
            elif path.startswith("/bytes/") and path[7:].isdigit():
                tools_mock.bytes_body(int(path[7:]), resp)
            elif path == "/sse":
                await tools_mock.sse_events(req.query, resp)
            else:
                resp.send(
                    404,
                    dumps(
                        {
                            "error": {
                                "message": f"No mock route for {method} {path}",
                                "type": "invalid_request_error",
                                "param": None,
                                "code": "not_found",
                            }
                        }
                    ),
                )
        except ValueError as e:  # bad JSON in the request body: answer like a provider would
            if resp.started:
                raise
            resp.send(
                400,
                dumps(
                    {
                        "error": {
                            "message": f"Invalid request body: {e}",
                            "type": "invalid_request_error",
                            "param": None,
                            "code": None,
                        }
                    }
                ),
            )


def _error_body(path: str, status: int) -> bytes:
    if path == "/v1/messages":
        return anthropic_mock.anthropic_error(status)
    if path.startswith("/v1beta/"):
        return gemini_ollama_mock.gemini_error(status)
    if path == "/api/chat":
        return dumps({"error": f"mock upstream forced status {status}"})
    return openai_mock.openai_error(status)


def _error_headers(status: int) -> dict[str, str]:
    # retry-after 0 keeps SDK retries fast in tests while staying a realistic header.
    return {"retry-after": "0", "x-request-id": "req_mock_error"} if status in (429, 503, 529) else {}


async def _serve_forever(args: argparse.Namespace) -> None:
    upstream = MockUpstream(record=not args.no_record)
    await upstream.start(args.host, args.port, args.tls)
    print(f"LISTENING {upstream.port}", flush=True)
    if upstream.ca_pem_path:
        print(f"CA {upstream.ca_pem_path}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await upstream.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brownout.proxy.demo.upstream", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: 0, a free one, printed)")
    parser.add_argument("--tls", action="store_true", help="serve HTTPS with a throwaway CA (its path is printed)")
    parser.add_argument("--no-record", action="store_true", help="do not keep requests_seen")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
