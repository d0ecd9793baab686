"""Faults through the real proxy, observed with the official SDKs: each must look like the real failure."""

from __future__ import annotations

import itertools
import json
import threading
import time

import anthropic
import httpx
import openai
import pytest

from tests.proxy.test_passthrough import collect, wait_for

MSG = [{"role": "user", "content": "weather in Paris?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def rules(*items: str, seed: int = 1) -> str:
    return f"version: 1\nseed: {seed}\nrules:\n" + "".join(items)


def rule(name: str, fault: str, match: str = "{}", schedule: str = "{}") -> str:
    return f"  - name: {name}\n    match: {match}\n    fault: {fault}\n    schedule: {schedule}\n"


def test_openai_429_becomes_rate_limit_error_after_sdk_retries(upstream, brownout_proxy, openai_client):
    seen, on_exchange = collect()
    cfg = rules(rule("oa-429", "{type: http_error, status: 429, retry_after_s: 0}", "{provider: openai}"))
    proxy = brownout_proxy(cfg, upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream, max_retries=2)
    with pytest.raises(openai.RateLimitError) as err:
        client.chat.completions.create(model="gpt-4o", messages=MSG)
    assert err.value.code == "rate_limit_exceeded"
    assert err.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    wait_for(seen, 3)
    assert [ex.retry_count for ex in seen] == [0, 1, 2]
    assert all(ex.faults[0].rule == "oa-429" for ex in seen)
    assert upstream.requests_seen == []  # the request never reached upstream


def test_anthropic_529_becomes_overloaded_error(upstream, brownout_proxy, anthropic_client):
    cfg = rules(rule("an-529", "{type: http_error, status: 529}", "{provider: anthropic}"))
    proxy = brownout_proxy(cfg, upstream=upstream)
    client = anthropic_client(proxy, upstream)
    with pytest.raises(anthropic.OverloadedError) as err:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=MSG)
    assert err.value.status_code == 529
    assert err.value.body["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize("phase", ["request", "mid_body"])
def test_reset_becomes_api_connection_error(upstream, brownout_proxy, openai_client, phase):
    fault = "{type: reset, phase: request}" if phase == "request" else "{type: reset, phase: mid_body, after_bytes: 40}"
    proxy = brownout_proxy(rules(rule("rst", fault)), upstream=upstream)
    client = openai_client(proxy, upstream)
    with pytest.raises(openai.APIConnectionError):
        stream = client.chat.completions.create(model="gpt-4o", messages=MSG, stream=True)
        for _ in stream:
            pass


def test_truncated_stream_ends_without_done_and_sdk_returns_partial(upstream, brownout_proxy, openai_client):
    seen, on_exchange = collect()
    cfg = rules(rule("cut", "{type: truncate, after_events: 2}", "{stream: true}"))
    proxy = brownout_proxy(cfg, upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream)
    chunks = list(client.chat.completions.create(model="gpt-4o", messages=MSG, stream=True))
    assert len(chunks) == 2  # no error: the SDK silently accepts a stream without [DONE]
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as raw:
        body = raw.post(
            f"{upstream.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": MSG, "stream": True}
        ).text
    assert "[DONE]" not in body and body.count("data:") == 2
    wait_for(seen, 2)
    assert seen[0].stream_complete is False and seen[0].faults[0].fault == "truncate"


@pytest.mark.parametrize("stream", [False, True])
def test_openai_tool_arguments_no_longer_parse(upstream, brownout_proxy, openai_client, stream):
    cfg = rules(rule("bad-args", "{type: malformed_json, target: tool_arguments}", "{provider: openai}"))
    proxy = brownout_proxy(cfg, upstream=upstream)
    client = openai_client(proxy, upstream)
    if stream:
        chunks = client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS, stream=True)
        args = "".join(
            tc.function.arguments or "" for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])
        )
    else:
        reply = client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS)
        args = reply.choices[0].message.tool_calls[0].function.arguments
    assert args
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)


def test_anthropic_streamed_tool_input_no_longer_parses(upstream, brownout_proxy, anthropic_client):
    cfg = rules(rule("bad-args", "{type: malformed_json, target: tool_arguments}", "{provider: anthropic}"))
    proxy = brownout_proxy(cfg, upstream=upstream)
    client = anthropic_client(proxy, upstream)
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    partial = ""
    with client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=MSG, tools=tools, stream=True
    ) as events:
        for ev in events:
            if ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
                partial += ev.delta.partial_json
    assert partial
    with pytest.raises(json.JSONDecodeError):
        json.loads(partial)


def test_anthropic_tool_input_stays_an_object_that_breaks_its_schema(upstream, brownout_proxy, anthropic_client):
    # The API always sends tool_use.input as an object; what a client can meet is one its schema rejects.
    cfg = rules(rule("bad-args", "{type: malformed_json, target: tool_arguments}", "{provider: anthropic}"))
    proxy = brownout_proxy(cfg + "invariants:\n  - {type: tool_arguments_json}\n", upstream=upstream)
    violations: list = []
    proxy.addon.pipeline.violation_listeners.append(violations.append)
    client = anthropic_client(proxy, upstream)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [{"name": "get_weather", "input_schema": schema}]
    reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=MSG, tools=tools)
    (call,) = [b for b in reply.content if b.type == "tool_use"]
    assert isinstance(call.input, dict) and "city" not in call.input
    wait_for(violations, 1)
    assert violations[0].invariant == "tool_arguments_json" and violations[0].rule == "bad-args"
    assert "'city' is a required property" in violations[0].message


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_mid_stream_error_event_is_raised_by_sdk(upstream, brownout_proxy, openai_client, anthropic_client, provider):
    status = 500 if provider == "openai" else 529
    cfg = rules(
        rule(
            "mid",
            f"{{type: http_error, status: {status}, mid_stream: true, after_events: 2}}",
            f"{{provider: {provider}}}",
        )
    )
    proxy = brownout_proxy(cfg, upstream=upstream)
    if provider == "openai":
        client = openai_client(proxy, upstream)
        with pytest.raises(openai.APIError):
            for _ in client.chat.completions.create(model="gpt-4o", messages=MSG, stream=True):
                pass
    else:
        client = anthropic_client(proxy, upstream)
        with pytest.raises(anthropic.APIStatusError) as err:
            for _ in client.messages.create(model="claude-sonnet-4-5", max_tokens=32, messages=MSG, stream=True):
                pass
        assert "overloaded" in str(err.value).lower()


def timed_get(client: httpx.Client, url: str) -> float:
    t0 = time.perf_counter()
    client.get(url).raise_for_status()
    return time.perf_counter() - t0


def test_latency_fault_adds_its_delay(upstream, brownout_proxy):
    """The delay is added, never cut short; its accuracy (2% + 3 ms) is measured by bench/latency.py."""
    proxy = brownout_proxy(
        rules(rule("slow", "{type: latency, delay_ms: 500}", "{path: /tools/weather}")), upstream=upstream
    )
    base, slow = [], []
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        timed_get(client, f"{upstream.url}/ping")  # warm the connection
        for _ in range(4):  # interleaved, so drift on the machine hits both alike
            base.append(timed_get(client, f"{upstream.url}/ping"))
            slow.append(timed_get(client, f"{upstream.url}/tools/weather"))
    # Never cut short: no delayed request came back in under the delay, however fast the rest was.
    # (Subtracting the fastest plain request instead lets a loaded machine's noise in the other run
    # push an intact delay under the bound.)
    assert min(slow) >= 0.5, f"a delayed request took {min(slow) * 1000:.1f} ms"
    # Scheduling noise only ever adds time, so the fastest run of each is the best estimate: a
    # doubled delay would show here.
    added = min(slow) - min(base)
    assert added <= 0.6, f"added {added * 1000:.1f} ms"


def test_hang_does_not_delay_a_concurrent_request(upstream, brownout_proxy):
    proxy = brownout_proxy(
        rules(rule("stuck", "{type: hang, duration_ms: 3000}", "{path: /tools/search*}")), upstream=upstream
    )
    errors: list[Exception] = []

    def hung() -> None:
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as c:
            try:
                c.get(f"{upstream.url}/tools/search?q=x")
            except httpx.HTTPError as e:
                errors.append(e)

    t = threading.Thread(target=hung)
    t.start()
    time.sleep(0.2)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as c:
        took = timed_get(c, f"{upstream.url}/tools/weather")
    assert took < 0.5
    t.join(10)
    assert errors and isinstance(errors[0], (httpx.RemoteProtocolError, httpx.ReadError))


def test_stall_pauses_the_stream_mid_way(upstream, brownout_proxy):
    proxy = brownout_proxy(
        rules(rule("stall", "{type: stall, after_events: 2, pause_ms: 700}", "{path: /sse*}")), upstream=upstream
    )
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        t0 = time.perf_counter()
        arrivals = []
        with client.stream("GET", f"{upstream.url}/sse?events=4&delay_ms=10") as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    arrivals.append(time.perf_counter() - t0)
    assert len(arrivals) == 4
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert gaps[1] >= 0.6, gaps  # the pause sits between event 2 and 3
    assert gaps[0] < 0.3 and gaps[2] < 0.3, gaps


def test_throttle_paces_the_body(upstream, brownout_proxy):
    proxy = brownout_proxy(
        rules(rule("slow-body", "{type: throttle, bytes_per_s: 20000}", "{path: /bytes/*}")), upstream=upstream
    )
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        t0 = time.perf_counter()
        body = client.get(f"{upstream.url}/bytes/10000").content
        took = time.perf_counter() - t0
    assert len(body) == 10000
    assert 0.4 <= took <= 1.5, took


def test_invalid_hot_reload_keeps_last_good_config(upstream, brownout_proxy, tmp_path):
    path = tmp_path / "chaos.yaml"
    path.write_text(rules(rule("teapot", "{type: http_error, status: 418}")))
    proxy = brownout_proxy(path, upstream=upstream)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        assert client.get(f"{upstream.url}/ping").status_code == 418
        path.write_text(rules(rule("teapot", "{type: http_error, status: 99}")))
        time.sleep(2.5)
        assert client.get(f"{upstream.url}/ping").status_code == 418  # bad file rejected
        path.write_text(rules(rule("gone", "{type: http_error, status: 503}")))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and client.get(f"{upstream.url}/ping").status_code != 503:
            time.sleep(0.2)
        assert client.get(f"{upstream.url}/ping").status_code == 503


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_rule_acts_on_the_response_that_calls_the_tool(upstream, brownout_proxy, openai_client, stream):
    """`match: {tool: ...}` on an LLM provider is decided from the response: streamed or buffered."""
    seen, on_exchange = collect()
    cfg = rules(
        rule("weather-args", "{type: malformed_json, target: tool_arguments}", "{provider: openai, tool: get_weather}"),
        rule("other-tool", "{type: malformed_json, target: tool_arguments}", "{provider: openai, tool: search}"),
    )
    proxy = brownout_proxy(cfg, upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream)
    if stream:
        chunks = client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS, stream=True)
        args = "".join(
            tc.function.arguments or "" for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])
        )
    else:
        args = (
            client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS)
            .choices[0]
            .message.tool_calls[0]
            .function.arguments
        )
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)
    wait_for(seen, 1)
    assert [f.rule for f in seen[0].faults] == ["weather-args"]  # the rule for a tool not called stays quiet
