"""Header values that are no UTF-8 (latin-1 bytes, as old clients and hostile ones send them) go through a
real proxy like any other request: forwarded once, logged once, and no traceback."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.embed import ProxyHandle

BODY = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}'


def _raw_post(proxy: ProxyHandle, upstream: Any, headers: bytes) -> bytes:
    """A plain-HTTP proxy request written byte by byte, the answer read to the end."""
    host = upstream.url.removeprefix("http://").encode()
    request = b"POST " + upstream.url.encode() + b"/v1/chat/completions HTTP/1.1\r\nHost: " + host + b"\r\n" + headers
    request += b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(BODY)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(request + BODY)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def _exchanges(path: Path, n: int, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    lines: list[str] = []
    while len(lines) < n and time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        time.sleep(0.02)
    return [json.loads(line) for line in lines]


def test_a_latin1_authorization_header_is_forwarded_once_without_a_traceback(
    brownout_proxy: Callable[..., ProxyHandle], upstream: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "exchanges.jsonl"
    config = f"seed: 1\ncontrol: {{token: the-control-token}}\nexporters:\n  jsonl: {{exchanges_path: {log}}}\n"
    proxy = brownout_proxy(config, upstream=upstream)
    with caplog.at_level(logging.WARNING):
        answers = [
            _raw_post(proxy, upstream, b"Authorization: Bearer sk-\xe9\xff\xfe\r\nx-brownout-session: caf\xe9\r\n")
            for _ in range(2)
        ]
        exchanges = _exchanges(log, 2)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 2
    assert len(upstream.requests_seen) == 2  # each forwarded once
    assert [(x["status"], x["session"]) for x in exchanges] == [(200, "caf\ufffd")] * 2  # a name any log can write


def test_the_control_token_in_utf8_is_still_caught(
    brownout_proxy: Callable[..., ProxyHandle], upstream: Any, tmp_path: Path
) -> None:
    proxy = brownout_proxy("seed: 1\ncontrol: {token: t\u00e9-token}\n", upstream=upstream)
    answer = _raw_post(proxy, upstream, "Authorization: Bearer t\u00e9-token\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 421 ") and upstream.requests_seen == []
