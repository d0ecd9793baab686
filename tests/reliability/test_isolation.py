"""Promise 7: traffic that matches no rule is forwarded byte-for-byte.

Raw sockets on both sides, so nothing between the test and the wire normalises anything: the
same request is sent directly and through brownout (absolute-form, as an HTTP proxy client
does), and the responses are compared header by header (name case, order, values) and body byte
by body byte. The upstream records each request exactly as it arrived, for the reverse check.

What mitmproxy legitimately changes (and the tests allow):
- chunk boundaries of a chunked body: mitmproxy re-frames the chunks it streams on (same
  decoded bytes, same `transfer-encoding: chunked` header); nothing else in the response.
- on the request side, the request line: the proxy client sends absolute-form
  (`GET http://host/path`), the upstream receives origin-form (`GET /path`), as with any
  proxy; `Proxy-Authorization` (brownout's session credential) is removed. Hop-by-hop headers
  (`Proxy-Connection`, `Connection`, `Keep-Alive`, `TE`, `Trailer`, `Upgrade`) are not compared.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from typing import Any

import pytest

from tests.reliability.rawupstream import RawRequest, RawUpstream, chunked, gzip_bytes, http_response

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer", "upgrade"}

CHAT = json.dumps(
    {
        "id": "chatcmpl-9",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "isolated"}, "finish_reason": "stop"}],
    }
).encode()
SSE = (
    b"".join(b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"%d"}}]}\n\n' % i for i in range(5))
    + b"data: [DONE]\n\n"
)
NDJSON = (
    b"".join(b'{"model":"llama3","message":{"role":"assistant","content":"%d"},"done":false}\n' % i for i in range(5))
    + b'{"model":"llama3","done":true}\n'
)
BINARY = bytes(range(256)) * 300 + b"\x00\xff\r\n\r\n"
ODD_HEADERS = [
    ("X-Request-ID", "req_123"),
    ("x-ratelimit-remaining-requests", "99"),
    ("Set-Cookie", "a=1"),
    ("Set-Cookie", "b=2"),
    ("X-Weird-Case", "  spaced value "),
    ("Server", "upstream/1.0"),
]

# path -> raw response (content-length, chunked and gzip framings; header case and order deliberate)
RESPONSES: dict[str, bytes] = {
    "/v1/chat/completions": http_response(200, [("Content-Type", "application/json"), *ODD_HEADERS], CHAT),
    "/sse": http_response(
        200,
        [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-cache"),
            ("Transfer-Encoding", "chunked"),
            *ODD_HEADERS,
        ],
        chunked(*[SSE[i : i + 37] for i in range(0, len(SSE), 37)]),
        length=False,
    ),
    "/api/chat": http_response(
        200,
        [("Content-Type", "application/x-ndjson"), ("Transfer-Encoding", "chunked")],
        chunked(*NDJSON.splitlines(keepends=True)),
        length=False,
    ),
    "/gzip": http_response(
        200,
        [("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")],
        gzip_bytes(CHAT * 20),
    ),
    "/binary": http_response(200, [("Content-Type", "application/octet-stream"), ("ETag", '"abc"')], BINARY),
    "/big": http_response(200, [("Content-Type", "application/octet-stream")], BINARY * 40),  # > 1m: streamed
    "/error": http_response(
        429,
        [("Content-Type", "application/json"), ("Retry-After", "1")],
        b'{"error":{"type":"rate_limit_exceeded"}}',
        reason="Too Many Requests",
    ),
}


async def _serve(req: RawRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    raw = RESPONSES.get(req.path, http_response(404, [], b""))
    writer.write(raw)
    await writer.drain()
    return True


def read_response(sock: socket.socket) -> tuple[str, list[tuple[str, str]], bytes]:
    """Status line, headers (as sent) and the de-chunked body of one response."""
    f = sock.makefile("rb")
    status = f.readline().decode("latin-1").rstrip("\r\n")
    headers: list[tuple[str, str]] = []
    while (line := f.readline()) not in (b"\r\n", b""):
        k, _, v = line.decode("latin-1").rstrip("\r\n").partition(":")
        headers.append((k, v.strip()))
    lower = {k.lower(): v for k, v in headers}
    if lower.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while (size := int(f.readline().split(b";")[0], 16)) > 0:
            body += f.read(size)
            f.readline()
        f.readline()
    else:
        body = f.read(int(lower.get("content-length", "0")))
    return status, headers, body


def exchange(
    host: str,
    port: int,
    target: str,
    upstream_port: int,
    *,
    method: str = "GET",
    headers: list[tuple[str, str]] = (),
    body: bytes = b"",
) -> tuple[str, list, bytes]:
    with socket.create_connection((host, port), timeout=10) as sock:
        head = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{upstream_port}", *[f"{k}: {v}" for k, v in headers]]
        if body or method == "POST":
            head.append(f"Content-Length: {len(body)}")
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        return read_response(sock)


def comparable(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]


NO_MATCH_RULES = """version: 1
seed: 3
rules:
  - name: elsewhere
    match: {host: api.elsewhere.example}
    fault: {type: http_error, status: 500}
    schedule: {}
  - name: never-this-path
    match: {path: /not-here}
    fault: {type: malformed_json, target: body}
    schedule: {}
invariants:
  - {type: tool_arguments_json}
"""


@pytest.mark.timeout(30)
@pytest.mark.parametrize("config", [None, NO_MATCH_RULES], ids=["no_rules", "rules_matching_nothing"])
def test_responses_are_forwarded_byte_for_byte(brownout_proxy, config):
    seen: list[Any] = []
    proxy = brownout_proxy(config, on_exchange=seen.append)
    with RawUpstream(_serve).running() as up:
        for path in RESPONSES:
            method, body = ("POST", b'{"model":"gpt-4o-mini","stream":true}') if path != "/binary" else ("GET", b"")
            direct = exchange("127.0.0.1", up.port, path, up.port, method=method, body=body)
            proxied = exchange(
                proxy.host, proxy.port, f"http://127.0.0.1:{up.port}{path}", up.port, method=method, body=body
            )
            assert proxied[0] == direct[0], path  # status line, reason phrase included
            assert comparable(proxied[1]) == comparable(direct[1]), path  # names, case, order, values
            assert proxied[2] == direct[2], path  # body bytes (gzip stays compressed)
    assert len(seen) == len(RESPONSES) and all(not ex.faults for ex in seen)
    assert dict(proxy.addon.guard.errors) == {}


@pytest.mark.timeout(30)
def test_requests_reach_the_upstream_unchanged(brownout_proxy):
    """Method, path and query, headers (minus the proxy credential and hop-by-hop) and body."""
    proxy = brownout_proxy(NO_MATCH_RULES)
    cred = base64.b64encode(b"run-7:").decode()
    requests = [
        (
            "POST",
            "/v1/chat/completions?api-version=2024-01-01&key=abc",
            [
                ("Content-Type", "application/json"),
                ("Authorization", "Bearer sk-secret"),
                ("X-Stainless-Retry-Count", "0"),
                ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
                ("Accept-Encoding", "gzip, br"),
                ("X-Mixed-CASE", "Value"),
                ("Cookie", "session=1"),
            ],
            json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "héllo \u2603"}]}).encode(),
        ),
        ("GET", "/tools/weather?city=Oslo&units=metric", [("Accept", "*/*"), ("User-Agent", "agent/1.0")], b""),
        ("PUT", "/binary", [("Content-Type", "application/octet-stream")], BINARY),
        ("DELETE", "/v1/files/file-1", [("X-Empty", "")], b""),
    ]
    with RawUpstream(_serve).running() as up:
        for method, target, headers, body in requests:
            exchange("127.0.0.1", up.port, target, up.port, method=method, headers=headers, body=body)
            exchange(
                proxy.host,
                proxy.port,
                f"http://127.0.0.1:{up.port}{target}",
                up.port,
                method=method,
                headers=[*headers, ("Proxy-Authorization", f"Basic {cred}"), ("Proxy-Connection", "keep-alive")],
                body=body,
            )
        seen = up.requests
    assert len(seen) == 2 * len(requests)
    for direct, proxied in zip(seen[0::2], seen[1::2], strict=True):
        assert (proxied.method, proxied.target, proxied.protocol) == (direct.method, direct.target, direct.protocol)
        assert comparable(proxied.headers) == comparable(direct.headers), direct.target
        assert proxied.body == direct.body, direct.target
        assert not any(k.lower() == "proxy-authorization" for k, _ in proxied.headers)


@pytest.mark.timeout(30)
def test_https_requests_and_responses_unchanged_through_the_tunnel(upstream_tls, brownout_proxy):
    """Over CONNECT + TLS (brownout's CA): MockUpstream.requests_seen is identical with and without brownout."""
    import ssl

    import httpx

    proxy = brownout_proxy(NO_MATCH_RULES, upstream=upstream_tls)
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    calls = [
        ("POST", "/v1/chat/completions", chat),
        ("POST", "/v1/chat/completions", {**chat, "stream": True}),
        ("GET", "/tools/weather?city=Oslo", None),
    ]
    headers = {"authorization": "Bearer sk-test", "x-custom": "1", "accept-encoding": "identity"}
    direct_ctx = ssl.create_default_context(cafile=upstream_tls.ca_pem_path)
    proxy_ctx = ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
    answers = []
    for client in (
        httpx.Client(trust_env=False, verify=direct_ctx),
        httpx.Client(trust_env=False, verify=proxy_ctx, proxy=proxy.proxy_url("run-1")),
    ):
        with client:
            answers.append([client.request(m, upstream_tls.url + p, json=b, headers=headers) for m, p, b in calls])
    for d, p in zip(*answers, strict=True):
        # The mock mints ids per call, so bodies are compared byte for byte in the raw test above;
        # here: status and every header except the per-call ones.
        per_call = {"date", "content-length", "x-request-id"}
        assert p.status_code == d.status_code
        assert [(k, v) for k, v in p.headers.multi_items() if k not in per_call | HOP_BY_HOP] == [
            (k, v) for k, v in d.headers.multi_items() if k not in per_call | HOP_BY_HOP
        ]
    seen = upstream_tls.requests_seen
    assert len(seen) == 2 * len(calls)
    for d, p in zip(seen[: len(calls)], seen[len(calls) :], strict=True):
        assert (p.method, p.path, p.body) == (d.method, d.path, d.body)
        assert {k: v for k, v in p.headers.items() if k not in HOP_BY_HOP} == {
            k: v for k, v in d.headers.items() if k not in HOP_BY_HOP
        }
