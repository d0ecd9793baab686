"""Shared pieces of the bad-input tests (promise 2): requests, a collector, cached clients.

Each case drives the real proxy against a raw upstream (tests/reliability/rawupstream.py) that
sends exactly the bytes under test, and checks three things:
- the client receives what it would receive without brownout (same status and body bytes, or the
  same class of failure), unless a fault was configured;
- the exchange is recorded (with `parse_error` where the body cannot be parsed);
- expected bad input is not counted as a brownout internal error (`brownout_internal_errors_total`
  reads the Guard's counter; the fault engine keeps its own).
"""

from __future__ import annotations

import json
import ssl
import time
from typing import Any

import httpx

from brownout.core.exchange import PARSE_ERROR_REASONS, Exchange

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
CHAT_STREAM = {**CHAT, "stream": True}
JSON_CT = [("content-type", "application/json")]
SSE_CT = [("content-type", "text/event-stream")]
GOOD_CHAT = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello there"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
).encode()
TOOL_JSON = json.dumps(
    {"city": "Oslo", "conditions": "A long description of light rain over the fjord today."}
).encode()


# --- helpers ---------------------------------------------------------------------------------


class Collector:
    def __init__(self) -> None:
        self.seen: list[Exchange] = []

    def __call__(self, ex: Exchange) -> None:
        self.seen.append(ex)

    def wait(self, n: int = 1, timeout_s: float = 10.0) -> list[Exchange]:
        deadline = time.monotonic() + timeout_s
        while len(self.seen) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(self.seen) >= n, f"expected {n} exchanges, got {len(self.seen)}"
        return self.seen


def internal_errors(handle: Any) -> dict[str, int]:
    errors = dict(handle.addon.guard.errors)
    return {k: v for k, v in errors.items() if v}


def parse_errors(handle: Any) -> dict[str, int]:
    """brownout_parse_errors_total by reason (those above zero)."""
    registry = handle.addon.pipeline.exporters.metrics.registry
    counts = {r: registry.get_sample_value("brownout_parse_errors_total", {"reason": r}) for r in PARSE_ERROR_REASONS}
    return {r: int(n) for r, n in counts.items() if n}


_CLIENTS: dict[Any, httpx.Client] = {}


def close_clients() -> None:
    for c in _CLIENTS.values():
        c.close()
    _CLIENTS.clear()


def client_for(proxy: Any = None, **kw: Any) -> httpx.Client:
    """A cached httpx client, direct or through a proxy (building one costs ~0.1 s of CA loading)."""
    key = (proxy.proxy_url() if proxy is not None else None, tuple(sorted(kw.items())))
    if key not in _CLIENTS:
        _CLIENTS[key] = httpx.Client(trust_env=False, timeout=10.0, proxy=key[0], verify=False, **kw)
    return _CLIENTS[key]


def fetch(url: str, proxy: Any = None, *, method: str = "POST", body: Any = CHAT) -> dict[str, Any]:
    """One request; the raw (undecoded) body, or the exception type if the exchange failed."""
    out: dict[str, Any] = {"status": None, "body": b"", "headers": None, "error": None}
    client = client_for(proxy)
    try:
        with client.stream(method, url, json=body if method == "POST" else None) as r:
            out["status"], out["headers"] = r.status_code, r.headers
            for chunk in r.iter_raw():
                out["body"] += chunk
    except httpx.HTTPError as e:
        out["error"] = type(e).__name__
    return out


def rules(*items: str) -> str:
    return "version: 1\nseed: 1\nrules:\n" + "".join(items)


def rule(name: str, fault: str, match: str = "{}") -> str:
    return f"  - name: {name}\n    match: {match}\n    fault: {fault}\n    schedule: {{}}\n"


def sse(*datas: str) -> bytes:
    return b"".join(f"data: {d}\n\n".encode() for d in datas)


def chat_chunk(text: str) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        }
    )


# --- invalid, truncated, non-UTF-8, mislabelled bodies ---------------------------------------


def wait_until(cond: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


class _H2First(ssl.SSLContext):
    """httpx/httpcore offer ["http/1.1", "h2"]; offer h2 first, as curl, Go and browsers do."""

    def set_alpn_protocols(self, protocols: Any) -> None:
        super().set_alpn_protocols(["h2", "http/1.1"] if "h2" in protocols else protocols)


def h2_first_context(cafile: Any) -> ssl.SSLContext:
    ctx = _H2First(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=str(cafile))
    return ctx
