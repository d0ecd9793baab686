"""Core pass-through through the real proxy: unbuffered streams, the exchange model, sessions."""

from __future__ import annotations

import time
from typing import Any

import httpx

from brownout.core.exchange import Exchange


def collect() -> tuple[list[Exchange], Any]:
    seen: list[Exchange] = []
    return seen, seen.append


def wait_for(seen: list[Exchange], n: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(seen) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(seen) >= n, f"expected {n} exchanges, got {len(seen)}"


def chunk_times(client: httpx.Client, url: str) -> tuple[float, list[float], bytes]:
    t0 = time.perf_counter()
    times, body = [], b""
    with client.stream("GET", url) as r:
        for chunk in r.iter_raw():
            times.append(time.perf_counter() - t0)
            body += chunk
    return t0, times, body


def test_sse_streams_unbuffered_with_timing_preserved(upstream, brownout_proxy):
    seen, on_exchange = collect()
    proxy = brownout_proxy(upstream=upstream, on_exchange=on_exchange)
    url = f"{upstream.url}/sse?events=8&delay_ms=120"
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        _, proxied, body = chunk_times(client, url)
    with httpx.Client(trust_env=False) as client:
        _, _direct, direct_body = chunk_times(client, url)
    assert body == direct_body
    # Buffering would deliver everything at once after ~0.84 s. Relative bounds: a loaded CI
    # machine may delay or coalesce a read, never turn a buffered body into a spread-out one.
    assert proxied[0] < proxied[-1] / 2, proxied
    assert proxied[-1] - proxied[0] > 0.6, proxied
    assert len(proxied) >= 4, proxied
    wait_for(seen, 1)
    ex = seen[0]
    assert ex.streamed and ex.stream_events >= 8
    assert ex.timings.ttfc_s is not None and ex.timings.duration_s is not None
    assert ex.timings.ttfc_s < ex.timings.duration_s / 2


def test_openai_stream_recorded_in_exchange(upstream, brownout_proxy, openai_client):
    seen, on_exchange = collect()
    proxy = brownout_proxy(upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "weather in Paris?"}],
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    args = "".join(
        tc.function.arguments or ""
        for chunk in stream
        for choice in chunk.choices
        for tc in (choice.delta.tool_calls or [])
    )
    wait_for(seen, 1)
    ex = seen[0]
    assert (ex.provider, ex.operation, ex.model, ex.stream) == ("openai", "chat", "gpt-4o-mini", True)
    assert ex.stream_complete is True
    assert [t.name for t in ex.tools_declared] == ["get_weather"]
    assert len(ex.tool_calls) == 1 and ex.tool_calls[0].name == "get_weather"
    assert ex.tool_calls[0].arguments == args and '"city"' in args
    assert ex.usage.input_tokens and ex.usage.output_tokens
    assert ex.status == 200 and ex.faults == []


def test_https_through_ca_bundle_and_session_from_proxy_username(
    upstream_tls, brownout_proxy, openai_client, anthropic_client
):
    seen, on_exchange = collect()
    proxy = brownout_proxy(upstream=upstream_tls, on_exchange=on_exchange)
    oa = openai_client(proxy, upstream_tls, session="run-17")
    reply = oa.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert reply.choices[0].message.content
    an = anthropic_client(proxy, upstream_tls, session="run-18")
    msg = an.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text
    wait_for(seen, 2)
    by_provider = {ex.provider: ex for ex in seen}
    assert by_provider["openai"].session == "run-17"
    assert by_provider["anthropic"].session == "run-18"
    assert by_provider["anthropic"].usage.output_tokens
    assert by_provider["openai"].scheme == "https"
    # The proxy credential is brownout's alone: upstream never sees it.
    assert all("proxy-authorization" not in r.headers for r in upstream_tls.requests_seen)


def test_plain_http_session_header_and_traceparent(upstream, brownout_proxy):
    seen, on_exchange = collect()
    proxy = brownout_proxy(upstream=upstream, on_exchange=on_exchange)
    tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with httpx.Client(proxy=proxy.proxy_url("run-9"), trust_env=False) as client:
        client.get(f"{upstream.url}/tools/weather?city=Oslo&key=SECRET123")
        client.get(f"{upstream.url}/tools/weather", headers={"x-brownout-session": "explicit"})
        client.get(f"{upstream.url}/tools/weather", headers={"traceparent": tp})
    wait_for(seen, 3)
    assert [ex.session for ex in seen] == ["run-9", "explicit", "0af7651916cd43dd8448eb211c80319c"]
    first = seen[0]
    assert (first.provider, first.operation, first.tool_name) == ("http", "execute_tool", "weather")
    assert "SECRET123" not in first.path and "Oslo" in first.path
    assert '"conditions"' in first.output_text
    assert all("proxy-authorization" not in r.headers for r in upstream.requests_seen)


def test_large_body_streams_and_arrives_intact(upstream, brownout_proxy):
    seen, on_exchange = collect()
    proxy = brownout_proxy("proxy: {stream_large_bodies: 64k}\n", upstream=upstream, on_exchange=on_exchange)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client:
        body = client.get(f"{upstream.url}/bytes/3000000").content
    assert len(body) == 3_000_000
    wait_for(seen, 1)
    assert seen[0].streamed and seen[0].response_bytes == 3_000_000


def test_large_request_is_still_recognised_and_faulted(upstream, brownout_proxy, openai_client):
    """A long-context request (2 MB) is buffered, recognised and faulted, not streamed past the rules."""
    import openai
    import pytest

    seen, on_exchange = collect()
    cfg = "version: 1\nrules:\n  - {name: oa-429, match: {provider: openai}, fault: {type: http_error, status: 429}}\n"
    proxy = brownout_proxy(cfg, upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x" * 2_000_000}])
    wait_for(seen, 1)
    assert (seen[0].provider, seen[0].model, seen[0].faults[0].rule) == ("openai", "gpt-4o", "oa-429")


def test_chunked_json_of_unknown_size_streams_and_is_still_parsed(brownout_proxy):
    """A chunked body may be any size, so it streams through; a bounded copy is parsed at the end."""
    import json as _json

    from tests.reliability.rawupstream import RawUpstream, chunked, fixed, http_response

    body = _json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "chunked hello"}}
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()
    raw = http_response(
        200,
        [("content-type", "application/json"), ("transfer-encoding", "chunked")],
        chunked(body[:40], body[40:]),
        length=False,
    )
    seen, on_exchange = collect()
    proxy = brownout_proxy(on_exchange=on_exchange)
    with RawUpstream(fixed(raw)).running() as up, httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        got = client.post(f"{up.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": []}).content
    assert got == body
    wait_for(seen, 1)
    ex = seen[0]
    assert ex.streamed and ex.output_text == "chunked hello" and ex.usage.output_tokens == 2
