"""The official SDKs recorded through the real proxy, then replayed with the upstream gone: same content,
same tool calls. TLS upstream: HTTPS clients keep working through brownout's CA with nothing to reach."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.record.support import load, mock_upstream, player, recorder, wait_recorded

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def openai_session(client: Any) -> dict[str, Any]:
    """Non-streamed chat with a tool call, its follow-up, a streamed chat and a streamed Responses call."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL])
    call = first.choices[0].message.tool_calls[0]
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 18}'},
    ]
    second = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL])
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Say hello"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    events = list(
        client.responses.create(
            model="gpt-4o-mini", input="What is the weather in Oslo?", tools=[_responses_tool()], stream=True
        )
    )
    return {
        "first": first.model_dump(),
        "second": second.model_dump(),
        "stream_text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        "stream_ids": [c.id for c in chunks],
        "responses": [e.model_dump() for e in events],
    }


def _responses_tool() -> dict[str, Any]:
    fn = WEATHER_TOOL["function"]
    return {"type": "function", "name": fn["name"], "description": fn["description"], "parameters": fn["parameters"]}


def anthropic_session(client: Any) -> dict[str, Any]:
    """A streamed message that asks for a tool (tool_use with input_json_delta), then the streamed answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the weather in Paris?"}]
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=[ANTHROPIC_TOOL]
    ) as s:
        first = s.get_final_message()
    tool_use = next(b for b in first.content if b.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use.id, "content": "18 C"}]},
    ]
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=[ANTHROPIC_TOOL]
    ) as s:
        second = s.get_final_message()
    return {"first": first.model_dump(), "second": second.model_dump(), "tool": (tool_use.name, tool_use.input)}


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_openai_sdk_replays_what_it_recorded(brownout_proxy, openai_client, tmp_path: Path, tls: bool) -> None:
    cassettes = tmp_path / "cassettes"
    with mock_upstream(tls=tls) as up:
        rec = recorder(brownout_proxy, cassettes, upstream=up)
        recorded = openai_session(openai_client(rec, up, session="agent-1"))
        wait_recorded(rec, 4)
        url = up.url
    assert recorded["first"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert recorded["stream_text"]
    play = player(brownout_proxy, cassettes, speed=0)
    replayed = openai_session(openai_client(play, url, session="agent-1"))
    assert replayed == recorded
    assert play.addon.tape.counts["hit"] == 4 and play.addon.tape.counts["miss"] == 0


def test_anthropic_sdk_streamed_tool_use_replays(brownout_proxy, anthropic_client, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        recorded = anthropic_session(anthropic_client(rec, up, session="claude-1"))
        wait_recorded(rec, 2)
        url = up.url
    assert recorded["tool"][0] == "get_weather" and recorded["tool"][1]
    [cassette] = load(cassettes)
    assert all(r.events for r in cassette.exchanges), "streamed answers are kept event by event"
    assert any(b"input_json_delta" in e.data for r in cassette.exchanges for e in r.events or [])
    play = player(brownout_proxy, cassettes, speed=0)
    assert anthropic_session(anthropic_client(play, url, session="claude-1")) == recorded


def test_a_request_never_recorded_is_a_clear_error_not_a_hang(
    brownout_proxy, openai_client, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import openai

    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        openai_client(rec, up).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
        )
        wait_recorded(rec, 1)
        url = up.url
    play = player(brownout_proxy, cassettes)
    client = openai_client(play, url, timeout=10)
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "something else"}])
    assert "no recorded answer" in str(err.value) and "/v1/chat/completions" in str(err.value)
    assert play.addon.tape.counts["miss"] == 1
    metrics = play.addon.pipeline.exporters.metrics.registry
    assert metrics.get_sample_value("brownout_replay_requests_total", {"outcome": "miss"}) == 1
    # The log names the miss with the normalised request, so the user sees which part differed.
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay miss")]
    assert '"something else"' in line and '"model": "gpt-4o-mini"' in line and '"provider": "openai"' in line


def test_volatile_fields_do_not_decide_the_match(brownout_proxy, openai_client, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    messages = [{"role": "user", "content": "hi"}]
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        first = openai_client(rec, up).chat.completions.create(model="gpt-4o-mini", messages=messages, user="alice")
        wait_recorded(rec, 1)
        url = up.url
    play = player(brownout_proxy, cassettes)
    again = openai_client(play, url).chat.completions.create(
        model="gpt-4o-mini", messages=messages, user="bob", metadata={"run": "42"}, store=False
    )
    assert again.id == first.id


def test_an_ndjson_stream_is_kept_line_by_line_and_replayed_byte_for_byte(brownout_proxy, tmp_path: Path) -> None:
    import httpx

    cassettes = tmp_path / "cassettes"
    body = {"model": "llama3.2", "messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        with httpx.Client(proxy=rec.proxy_url("ollama-1"), timeout=10) as client:
            live = client.post(f"{up.url}/api/chat", json=body).content
        wait_recorded(rec, 1)
        url = up.url
    [[stream]] = [c.exchanges for c in load(cassettes)]
    assert stream.provider == "ollama" and stream.events is not None
    lines = live.splitlines(keepends=True)
    assert len(lines) > 2 and [e.data for e in stream.events] == lines  # one event a line, as sent
    assert [e.t for e in stream.events] == sorted(e.t for e in stream.events)
    play = player(brownout_proxy, cassettes, speed=0)
    with httpx.Client(proxy=play.proxy_url("ollama-1"), timeout=10) as client:
        assert client.post(f"{url}/api/chat", json={**body, "options": {"seed": 3}}).content == live
