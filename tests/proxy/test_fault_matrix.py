"""Every fault type against every provider it applies to, through the real proxy.

One proxy serves the whole matrix: each rule matches an `x-case` header, so a case is one request.
The client is raw httpx (the official SDKs' view is covered in test_faults_proxy.py and the per-fault
unit tests); assertions are on the bytes and timing the client saw and on the recorded fault.
"""

from __future__ import annotations

import json
import shutil
import time
from typing import Any

import httpx
import pytest

from brownout.core.wire.framing import EventStreamFramer
from tests.proxy.test_passthrough import collect, wait_for

TERMINAL = {"openai": "[DONE]", "anthropic": "message_stop", "ollama": '"done":true', "gemini": '"finishReason"',
            "bedrock": "messageStop"}  # fmt: skip
FAULTS = {
    "latency": "{type: latency, delay_ms: 400}",
    "stall": "{type: stall, after_events: 1, pause_ms: 400}",
    "throttle": "{type: throttle, bytes_per_s: 2000}",
    "truncate": "{type: truncate, after_events: 1}",
    "malformed_json": "{type: malformed_json, target: body}",
    "http_error": "{type: http_error, status: 503}",
    "reset": "{type: reset, phase: request}",
    "hang": "{type: hang, duration_ms: 300}",
    "empty": "{type: empty}",
    "inject": "{type: inject, target: completion, text: INJECTED-MARKER}",
    "mutate": "{type: mutate, kind: typos, rate: 1}",
}
STREAM_ONLY = {"stall", "truncate"}


def _request(provider: str, stream: bool) -> tuple[str, str, dict[str, Any] | None]:
    msgs = [{"role": "user", "content": "hello there"}]
    if provider == "openai":
        return "POST", "/v1/chat/completions", {"model": "gpt-4o-mini", "messages": msgs, "stream": stream}
    if provider == "anthropic":
        return (
            "POST",
            "/v1/messages",
            {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": msgs, "stream": stream},
        )
    if provider == "gemini":
        verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return (
            "POST",
            f"/v1beta/models/gemini-2.0-flash:{verb}",
            {"contents": [{"role": "user", "parts": [{"text": "hello there"}]}]},
        )
    if provider == "ollama":
        return "POST", "/api/chat", {"model": "llama3.2", "messages": msgs, "stream": stream}
    if provider == "bedrock":  # Converse; the model is in the path
        api = "converse-stream" if stream else "converse"
        return "POST", f"/model/anthropic.claude-3-haiku-20240307-v1%3A0/{api}", {
            "messages": [{"role": "user", "content": [{"text": "hello there"}]}]}  # fmt: skip
    return (
        "POST",
        "/mcp",
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "get_weather", "arguments": {"city": "Paris"}},
        },
    )


CASES = [
    (provider, fault, stream)
    for provider in ("openai", "anthropic", "gemini", "ollama", "bedrock", "mcp")
    for fault in FAULTS
    for stream in ((False, True) if provider != "mcp" else (False,))
    if not (fault in STREAM_ONLY and not stream)
    and not (provider == "mcp" and fault in {"empty", "inject", "malformed_json", "mutate"})
]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory, _ca_template: Any) -> Any:
    from brownout.proxy.demo.upstream import MockUpstream
    from brownout.proxy.embed import running_proxy

    rules = "".join(
        f"  - name: {name}\n    match: {{header: {{x-case: {name}}}}}\n    fault: {fault}\n"
        for name, fault in FAULTS.items()
    )
    work = tmp_path_factory.mktemp("matrix")
    confdir = work / "confdir"
    shutil.copytree(_ca_template, confdir)
    path = work / "chaos.yaml"
    path.write_text(f"version: 1\nseed: 1\nrules:\n{rules}")
    seen, on_exchange = collect()
    options = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    with (
        MockUpstream.run_in_thread() as up,
        running_proxy(path, confdir=confdir, extra_options=options, on_exchange=on_exchange) as proxy,
    ):
        yield up, proxy, seen


@pytest.mark.parametrize(("provider", "fault", "stream"), CASES, ids=lambda v: str(v))
def test_fault_acts_on_provider(matrix: Any, provider: str, fault: str, stream: bool) -> None:
    up, proxy, seen = matrix
    method, path, body = _request(provider, stream)
    before = len(seen)
    t0 = time.perf_counter()
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        try:
            r = client.request(method, f"{up.url}{path}", json=body, headers={"x-case": fault})
            status, text, error = r.status_code, r.text, None
        except httpx.TransportError as e:
            status, text, error = None, "", e
    took = time.perf_counter() - t0
    wait_for(seen, before + 1)
    ex = seen[-1]
    fired = [f.fault for f in (ex.faults_skipped if (provider, fault) == ("bedrock", "mutate") else ex.faults)]
    assert fired == [fault], (ex.faults, ex.faults_skipped)

    if fault == "latency":
        assert took >= 0.39 and status == 200
    elif fault == "stall":
        assert took >= 0.39 and status == 200 and TERMINAL[provider] in text.replace(" ", "")
    elif fault == "throttle":
        assert took >= 0.8 * len(r.content) / 2000 and status == 200
    elif fault == "truncate":
        assert status == 200 and TERMINAL[provider] not in text.replace(" ", "")
    elif fault == "malformed_json":
        if stream and provider == "bedrock":  # binary messages, each with valid CRCs and a payload that is no JSON
            frames = [ev.data for ev in EventStreamFramer().feed(r.content)]
            assert any(_unparseable(f) for f in frames if f)
        elif stream:
            frames = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")] or text.splitlines()
            assert any(_unparseable(f) for f in frames if f and f != "[DONE]")
        else:
            assert _unparseable(text)
    elif fault == "http_error":
        if provider == "mcp":  # a JSON-RPC error with the request's id, over HTTP 200
            assert status == 200 and json.loads(text)["error"] and json.loads(text)["id"] == 7
        else:
            assert status == 503
    elif fault in ("reset", "hang"):
        assert error is not None, (status, text[:200])
        if fault == "hang":
            assert took >= 0.29
    elif fault == "empty":
        assert status == 200 and "hello" not in text.lower() and "paris" not in text.lower()
        assert ex.output_text == "" and not ex.tool_calls
    elif fault == "inject":
        assert status == 200 and "INJECTED-MARKER" in text
    elif fault == "mutate" and provider == "bedrock":  # signed (SigV4): fired, skipped, the request untouched
        sent = up.requests_seen[-1]
        assert status == 200 and json.loads(sent.body) == body and not ex.faults
        assert [f.fault for f in ex.faults_skipped] == ["mutate"]
    elif fault == "mutate":
        sent = up.requests_seen[-1]
        assert status == 200 and sent.path == path and json.loads(sent.body) != body
        assert "hello there" not in sent.body.decode() and ex.faults[0].params["typos"] == 2
    # A fault that raised would still be recorded, and fail open: only the guard knows.
    assert proxy.addon.guard.snapshot() == {}, f"{fault} on {provider}: contained failures"


def _unparseable(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False
