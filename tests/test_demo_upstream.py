"""The mock upstream, driven directly (no proxy) by the official openai and anthropic SDKs."""

from __future__ import annotations

import itertools
import json
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from brownout.proxy.demo.upstream import MockUpstream

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": WEATHER_TOOL["function"]["parameters"],
}
USER = [{"role": "user", "content": "What's the weather in Paris?"}]


@pytest.fixture(scope="module")
def up() -> Iterator[MockUpstream]:
    with MockUpstream.run_in_thread() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def tls_up() -> Iterator[MockUpstream]:
    with MockUpstream.run_in_thread(tls=True) as upstream:
        yield upstream


def oai(u: MockUpstream, **kw: object) -> openai.OpenAI:
    if u.ca_pem_path:
        kw["http_client"] = openai.DefaultHttpxClient(verify=ssl.create_default_context(cafile=u.ca_pem_path))
    return openai.OpenAI(base_url=u.url + "/v1", api_key="sk-test", timeout=10, **kw)  # type: ignore[arg-type]


def claude(u: MockUpstream) -> anthropic.Anthropic:
    kw = {}
    if u.ca_pem_path:
        kw["http_client"] = anthropic.DefaultHttpxClient(verify=ssl.create_default_context(cafile=u.ca_pem_path))
    return anthropic.Anthropic(base_url=u.url, api_key="sk-ant-test", timeout=10, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("which", ["up", "tls_up"])
def test_openai_chat_plain_and_streamed(which: str, request: pytest.FixtureRequest) -> None:
    u: MockUpstream = request.getfixturevalue(which)
    client = oai(u)
    r = client.chat.completions.create(model="gpt-4o-mini", messages=USER)  # type: ignore[arg-type]
    assert r.id.startswith("chatcmpl-") and r.model == "gpt-4o-mini"
    assert r.choices[0].finish_reason == "stop" and r.usage and r.usage.total_tokens > 0
    text = r.choices[0].message.content
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=USER,
        stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text
    assert chunks[-1].usage is not None and not chunks[-1].choices


def test_openai_tool_call_round_trip(up: MockUpstream) -> None:
    client = oai(up)
    r = client.chat.completions.create(model="gpt-4o", messages=USER, tools=[WEATHER_TOOL])  # type: ignore[list-item,arg-type]
    call = r.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    follow = [
        *USER,
        r.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"city": "Paris", "temp_c": 18, "conditions": "cloudy"}'},
    ]
    final = client.chat.completions.create(model="gpt-4o", messages=follow, tools=[WEATHER_TOOL])  # type: ignore[arg-type]
    assert final.choices[0].message.content == "It is 18°C and cloudy in Paris."


def test_openai_streamed_tool_call_arguments_arrive_in_fragments(up: MockUpstream) -> None:
    stream = oai(up).chat.completions.create(model="gpt-4o", messages=USER, tools=[WEATHER_TOOL], stream=True)  # type: ignore[list-item,arg-type]
    fragments = [
        tc.function.arguments
        for c in stream
        for tc in (c.choices[0].delta.tool_calls or [])
        if tc.function and tc.function.arguments
    ]
    assert len(fragments) >= 3 and json.loads("".join(fragments)) == {"city": "Paris"}


def test_openai_responses_api(up: MockUpstream) -> None:
    client = oai(up)
    r = client.responses.create(model="gpt-4o-mini", input="hi")
    assert r.id.startswith("resp_") and r.output_text
    events = list(client.responses.create(model="gpt-4o-mini", input="hi", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == r.output_text
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER_TOOL["function"]["parameters"]}]
    fc = client.responses.create(model="gpt-4o-mini", input="weather?", tools=tools)  # type: ignore[arg-type]
    assert fc.output[0].type == "function_call" and json.loads(fc.output[0].arguments) == {"city": "Paris"}  # type: ignore[union-attr]


@pytest.mark.parametrize("which", ["up", "tls_up"])
def test_anthropic_messages(which: str, request: pytest.FixtureRequest) -> None:
    client = claude(request.getfixturevalue(which))
    m = client.messages.create(model="claude-mock-1", max_tokens=100, messages=USER)  # type: ignore[arg-type]
    assert m.stop_reason == "end_turn" and m.content[0].type == "text"
    with client.messages.stream(model="claude-mock-1", max_tokens=100, messages=USER) as s:  # type: ignore[arg-type]
        assert s.get_final_text() == m.content[0].text


def test_anthropic_tool_use_streamed_and_not(up: MockUpstream) -> None:
    client = claude(up)
    m = client.messages.create(model="claude-mock-1", max_tokens=100, messages=USER, tools=[ANTHROPIC_TOOL])  # type: ignore[arg-type,list-item]
    use = next(b for b in m.content if b.type == "tool_use")
    assert m.stop_reason == "tool_use" and use.input == {"city": "Paris"}
    with client.messages.stream(model="claude-mock-1", max_tokens=100, messages=USER, tools=[ANTHROPIC_TOOL]) as s:  # type: ignore[arg-type,list-item]
        final = s.get_final_message()
    assert next(b for b in final.content if b.type == "tool_use").input == {"city": "Paris"}
    follow = [
        *USER,
        {"role": "assistant", "content": m.model_dump()["content"]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": '{"city": "Paris", "temp_c": 18, "conditions": "cloudy"}',
                }
            ],
        },
    ]
    done = client.messages.create(model="claude-mock-1", max_tokens=100, messages=follow, tools=[ANTHROPIC_TOOL])  # type: ignore[arg-type,list-item]
    assert done.stop_reason == "end_turn" and "18°C" in done.content[0].text  # type: ignore[union-attr]


def test_ssl_cert_file_env_is_honoured(tls_up: MockUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", tls_up.ca_pem_path or "")
    client = openai.OpenAI(base_url=tls_up.url + "/v1", api_key="sk-test", timeout=10)
    assert client.chat.completions.create(model="m", messages=USER).choices[0].message.content  # type: ignore[arg-type]


def test_forced_status_is_retried_and_counted(up: MockUpstream) -> None:
    before = len(up.requests_seen)
    with pytest.raises(openai.RateLimitError):
        oai(up, max_retries=2).chat.completions.create(model="m", messages=USER, extra_headers={"x-mock-status": "429"})  # type: ignore[arg-type]
    seen = up.requests_seen[before:]
    assert [s.headers.get("x-stainless-retry-count") for s in seen] == ["0", "1", "2"]
    with pytest.raises(anthropic.InternalServerError) as info:
        claude(up).with_options(max_retries=0).messages.create(
            model="m", max_tokens=10, messages=USER, extra_headers={"x-mock-status": "529"}
        )  # type: ignore[arg-type]
    assert info.value.status_code == 529


def test_chunk_knobs_give_real_timing(up: MockUpstream) -> None:
    t0 = time.perf_counter()
    stream = oai(up).chat.completions.create(
        model="m",
        messages=USER,
        stream=True,  # type: ignore[arg-type]
        extra_headers={"x-mock-chunks": "5", "x-mock-chunk-delay-ms": "40"},
    )
    arrivals = [time.perf_counter() - t0 for c in stream if c.choices and c.choices[0].delta.content]
    assert len(arrivals) == 5
    # Lower bounds only (a loaded CI box makes everything later, never earlier). A late chunk
    # shrinks the gap after it, so bound the total from the request: four 40 ms waits came first.
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert arrivals[-1] >= 0.16, arrivals
    assert max(gaps) >= 0.03, gaps  # not one buffered burst


def test_body_bytes_and_tool_api(up: MockUpstream) -> None:
    with httpx.Client(base_url=up.url) as c:
        r = c.post(
            "/v1/chat/completions", json={"model": "m", "messages": USER}, headers={"x-mock-body-bytes": "50000"}
        )
        assert len(r.content) == 50000 and r.json()["choices"]
        assert c.get("/tools/weather", params={"city": "Paris"}).json() == {
            "city": "Paris",
            "temp_c": 18,
            "conditions": "cloudy",
        }
        assert isinstance(c.get("/tools/search", params={"q": "x"}).json(), list)
        assert len(c.get("/bytes/100000").content) == 100000
        assert len(c.get("/ping").content) == 1024
        assert c.get("/sse", params={"events": 3, "delay_ms": 0}).text.count("data:") == 3


def test_sse_stamp_carries_each_event_send_time(up: MockUpstream) -> None:
    def events(**params: int) -> list[dict[str, float]]:
        text = c.get("/sse", params=params).text
        return [json.loads(line[len("data: ") :]) for line in text.splitlines() if line.startswith("data: ")]

    with httpx.Client(base_url=up.url) as c:
        before = time.time()
        stamped = events(events=3, delay_ms=50, stamp=1)
        after = time.time()
        plain = events(events=1)
    assert [d["i"] for d in stamped] == [0, 1, 2]
    stamps = [d["t"] for d in stamped]
    assert before <= stamps[0] and stamps[-1] <= after
    assert all(b - a >= 0.045 for a, b in itertools.pairwise(stamps))  # stamped when sent, 50 ms apart
    assert plain == [{"i": 0}]


def test_gemini_ollama_mcp(up: MockUpstream) -> None:
    with httpx.Client(base_url=up.url) as c:
        body = {
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [
                {
                    "functionDeclarations": [
                        {"name": "get_weather", "parameters": WEATHER_TOOL["function"]["parameters"]}
                    ]
                }
            ],
        }
        g = c.post("/v1beta/models/gemini-2.0-flash:generateContent", json=body).json()
        assert g["candidates"][0]["content"]["parts"][0]["functionCall"] == {
            "name": "get_weather",
            "args": {"city": "Paris"},
        }
        s = c.post("/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse", json={"contents": body["contents"]})
        assert (
            s.headers["content-type"] == "text/event-stream" and "[DONE]" not in s.text and s.text.count("data: ") >= 2
        )
        lines = c.post("/api/chat", json={"model": "llama3.2", "messages": USER}).text.splitlines()
        assert json.loads(lines[-1])["done"] is True and json.loads(lines[0])["done"] is False
        init = c.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
        )
        sid = init.headers["mcp-session-id"]
        tools = c.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers={"mcp-session-id": sid}
        ).json()
        assert tools["result"]["tools"][0]["inputSchema"]["required"] == ["city"]
        call = c.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "get_weather", "arguments": {"city": "Paris"}},
            },
        ).json()
        assert json.loads(call["result"]["content"][0]["text"])["temp_c"] == 18
        sse = c.post("/mcp", json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers={"x-mock-sse": "1"})
        assert sse.headers["content-type"] == "text/event-stream" and '"id":4' in sse.text


@pytest.mark.parametrize("module", ["brownout.proxy.demo.upstream", "brownout.proxy.demo.agent"])
def test_help_shows_the_module_path_a_pip_user_types(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert out.startswith(f"usage: python -m {module} ")
    # the docstring's "Run: python -m ..." names the same importable path (help wraps it, so unwrap first)
    assert re.findall(r"python -m ([\w.]+)", " ".join(out.split())) == [module, module]


def test_bedrock_routes_for_boto3_and_a_tool_round_trip(up: MockUpstream) -> None:
    from botocore.exceptions import ClientError

    from tests.proxy.bedrock_support import TOOLS, client, invoke_stream

    c = client(up.url)
    ask = [{"role": "user", "content": [{"text": "What's the weather in Paris?"}]}]
    first = c.converse(modelId="anthropic.claude-3-haiku-20240307-v1:0", messages=ask, toolConfig=TOOLS)
    use = first["output"]["message"]["content"][1]["toolUse"]
    assert first["stopReason"] == "tool_use" and use["input"] == {"city": "Paris"}
    result = {"toolResult": {"toolUseId": use["toolUseId"], "content": [{"json": {"city": "Paris", "temp_c": 18,
                                                                                  "conditions": "cloudy"}}]}}  # fmt: skip
    history = [*ask, first["output"]["message"], {"role": "user", "content": [result]}]
    events = list(c.converse_stream(modelId="m", messages=history, toolConfig=TOOLS)["stream"])
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text == "It is 18°C and cloudy in Paris." and events[-2] == {"messageStop": {"stopReason": "end_turn"}}
    assert invoke_stream(c)[-1]["amazon-bedrock-invocationMetrics"]["outputTokenCount"] > 0
    c.meta.events.register("before-send.bedrock-runtime.*", lambda request, **_: request.headers.__setitem__(
        "x-mock-status", "429"))  # fmt: skip
    with pytest.raises(ClientError) as err:
        c.converse(modelId="m", messages=ask)
    assert err.value.response["Error"]["Code"] == "ThrottlingException"
