"""Replay matching: keys the wire formats normalise, recorded order per session, sessions bound stably."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from brownout.core.wire import BUILTIN, RequestInfo
from brownout.proxy.record.cassette import Cassette, Recorded
from brownout.proxy.record.matcher import ReplayIndex, normalised_request


def info(
    path: str, body: Any = None, *, host: str = "api.openai.com", query: str = "", method: str = "POST"
) -> RequestInfo:
    raw = json.dumps(body).encode() if body is not None else b""
    return RequestInfo(method=method, host=host, path=path, query=query, headers={}, body=raw)


def key(req: RequestInfo, **kw: Any) -> dict[str, Any]:
    return normalised_request(BUILTIN, req, **kw)


CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_openai_volatile_fields_are_left_out_and_deciding_ones_kept() -> None:
    base = key(info("/v1/chat/completions", CHAT))
    noisy = {**CHAT, "user": "u1", "metadata": {"a": 1}, "stream_options": {"include_usage": True}, "temperature": 0.3}
    assert key(info("/v1/chat/completions", noisy)) == base
    assert key(info("/v1/chat/completions", {**CHAT, "model": "gpt-4o-mini"})) != base
    assert key(info("/v1/chat/completions", {**CHAT, "stream": False})) != base
    assert key(info("/v1/chat/completions", {**CHAT, "tools": [{"type": "function"}]})) != base
    assert base["provider"] == "openai"


def test_anthropic_gemini_and_mcp_normalise_their_own_shapes() -> None:
    msg = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    a = key(info("/v1/messages", msg, host="api.anthropic.com"))
    assert (
        key(info("/v1/messages", {**msg, "metadata": {"user_id": "x"}, "max_tokens": 99}, host="api.anthropic.com"))
        == a
    )
    assert a["provider"] == "anthropic"
    path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    g = {"contents": [{"parts": [{"text": "hi"}]}]}
    gk = key(info(path, g, host="generativelanguage.googleapis.com", query="alt=sse&key=SECRET"))
    assert gk == key(info(path, g, host="generativelanguage.googleapis.com", query="key=OTHER&alt=sse"))
    assert gk["query"] == [("alt", "sse")]
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "w", "arguments": {"c": "P"}}}
    retried = {**call, "id": 9, "params": {**call["params"], "_meta": {"progressToken": 9}}}
    assert key(info("/mcp", call, host="localhost")) == key(info("/mcp", retried, host="localhost"))
    assert key(info("/mcp", call, host="localhost"))["provider"] == "mcp"


def test_ollama_and_plain_json_apis_leave_out_volatile_fields() -> None:
    chat = {"model": "llama3.2", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    o = key(info("/api/chat", chat, host="localhost"))
    assert o["provider"] == "ollama"
    assert key(info("/api/chat", {**chat, "options": {"seed": 1}, "keep_alive": "5m"}, host="localhost")) == o
    assert key(info("/api/chat", {**chat, "stream": False}, host="localhost")) != o
    search = {"query": "weather Paris", "limit": 3}
    s = key(info("/tools/search", search, host="localhost"))
    assert s["provider"] == "http" and s["body"] == search
    noisy = {**search, "request_id": "r-1", "timestamp": 1700000000, "metadata": {"trace": "x"}}
    assert key(info("/tools/search", noisy, host="localhost")) == s
    assert key(info("/tools/search", {**search, "limit": 4}, host="localhost")) != s


def test_ports_and_ignored_parameters_do_not_decide() -> None:
    a = key(info("/tools/weather", method="GET", host="127.0.0.1", query="city=Paris&_=123"), ignore_params=["_"])
    b = key(info("/tools/weather", method="GET", host="127.0.0.1", query="_=999&city=Paris"), ignore_params=["_"])
    assert a == b and key(info("/tools/weather", method="GET", host="127.0.0.1", query="city=Oslo")) != a


def recorded(session: str, n: int, body: dict[str, Any]) -> Recorded:
    return Recorded(
        session=session,
        seq=n,
        method="POST",
        url="http://127.0.0.1:8000/v1/chat/completions",
        request_headers=[("content-type", "application/json")],
        request_body=json.dumps(body).encode(),
        status=200,
        body=f"{session}#{n}".encode(),
    )


def cassette(session: str, *recs: Recorded) -> Cassette:
    return Cassette(Path(f"{session}.jsonl"), session, "", "", list(recs))


def answer(index: ReplayIndex, session: str, body: dict[str, Any]) -> bytes | None:
    k, _ = index.key(info("/v1/chat/completions", body, host="127.0.0.1"))
    m = index.take(session, k)
    return None if m is None else m.recorded.body


def test_identical_requests_get_recordings_in_order_then_the_last_again() -> None:
    index = ReplayIndex([cassette("a", recorded("a", 1, CHAT), recorded("a", 2, CHAT))], BUILTIN)
    assert [answer(index, "x", CHAT) for _ in range(3)] == [b"a#1", b"a#2", b"a#2"]
    strict = ReplayIndex([cassette("a", recorded("a", 1, CHAT))], BUILTIN, exhausted="miss")
    assert [answer(strict, "x", CHAT) for _ in range(2)] == [b"a#1", None]


def test_a_live_session_prefers_its_namesake_then_the_session_it_drew_from() -> None:
    other = {**CHAT, "messages": [{"role": "user", "content": "second"}]}
    index = ReplayIndex(
        [
            cassette("a", recorded("a", 1, CHAT), recorded("a", 2, other)),
            cassette("b", recorded("b", 1, CHAT), recorded("b", 2, other)),
        ],
        BUILTIN,
    )
    assert answer(index, "b", CHAT) == b"b#1"  # same name
    assert answer(index, "live", CHAT) == b"a#1"  # the first file that has it ...
    assert answer(index, "live", other) == b"a#2"  # ... and then the same one
    # Sessions are independent: interleaving never changes what each gets.
    assert answer(index, "live2", CHAT) == b"a#1"
