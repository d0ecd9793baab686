"""proxy.capture_max_bytes bounds every text brownout keeps, through the real proxy and the OpenAI SDK.

The request body, messages, tool results, the assistant's text and tool-call arguments kept on the
exchange, the content on spans (capture_content on) and the exchange log's argument shapes all stop
at the cap, whether the answer was buffered or streamed. The agent still gets every byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.proxy.test_passthrough import collect, wait_for

CAP = 10
PROMPT = "weather in Paris, please? " * 8  # 208 characters
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city", "unit"],
            },
        },
    }
]


def _config(tmp_path: Path) -> str:
    return (
        f"version: 1\nproxy: {{capture_max_bytes: {CAP}, capture_content: true}}\n"
        f"exporters:\n  jsonl: {{path: {tmp_path / 'violations.jsonl'}, exchanges_path: {tmp_path / 'exchanges.jsonl'}}}\n"
    )


def _kept(text: str, whole: str) -> bool:
    """`text` is what fits of `whole` in CAP bytes of UTF-8 (never half a character)."""
    return len(text.encode()) <= CAP and whole.startswith(text) and len(whole[: len(text) + 1].encode()) > CAP


def _ask(client: Any, messages: list[dict[str, Any]], stream: bool, **kw: Any) -> tuple[str, str]:
    """(assistant text, tool-call arguments) as the agent received them."""
    if not stream:
        message = client.chat.completions.create(model="gpt-4o", messages=messages, **kw).choices[0].message
        calls = message.tool_calls or []
        return message.content or "", "".join(c.function.arguments for c in calls)
    text, args = "", ""
    for chunk in client.chat.completions.create(model="gpt-4o", messages=messages, stream=True, **kw):
        delta = chunk.choices[0].delta if chunk.choices else None
        text += (delta.content or "") if delta else ""
        for call in (delta.tool_calls or []) if delta else []:
            args += call.function.arguments or "" if call.function else ""
    return text, args


@pytest.mark.parametrize("stream", [False, True], ids=["buffered", "streamed"])
def test_capture_max_bytes_bounds_every_kept_text(
    stream: bool, upstream: Any, brownout_proxy: Any, openai_client: Any, tmp_path: Path
) -> None:
    seen, on_exchange = collect()
    proxy = brownout_proxy(_config(tmp_path), upstream=upstream, on_exchange=on_exchange)
    spans = InMemorySpanExporter()
    proxy.call(proxy.addon.pipeline.exporters.add_span_processor, SimpleSpanProcessor(spans))
    client = openai_client(proxy, upstream)

    _, args = _ask(client, [{"role": "user", "content": PROMPT}], stream, tools=TOOLS)
    history = [
        {"role": "user", "content": PROMPT},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": args}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": json.dumps({"city": "Paris", "temp_c": 18, "conditions": "cloudy"}),
        },
    ]
    text, _ = _ask(client, history, stream)
    assert len(args) > CAP and len(text) > CAP  # the agent got everything: the cap is brownout's copy only
    wait_for(seen, 2)
    assert proxy.addon.pipeline.exporters.flush_logs()

    calling, answering = seen
    for ex in (calling, answering):
        assert 0 < len(ex.request_body.encode()) <= CAP < ex.request_bytes
        assert ex.messages and all(len(m.text.encode()) <= CAP for m in ex.messages)
    assert answering.tool_results and all(len(r.content.encode()) <= CAP for r in answering.tool_results)
    assert _kept(answering.output_text, text)
    (call,) = calling.tool_calls
    assert _kept(call.arguments, args) and call.capped

    got = {s.attributes["gen_ai.response.finish_reasons"][0]: dict(s.attributes) for s in spans.get_finished_spans()}
    for attrs in got.values():
        for message in json.loads(attrs["gen_ai.input.messages"]):
            assert all(len((part.get("content") or "").encode()) <= CAP for part in message["parts"])
    (answer,) = json.loads(got["stop"]["gen_ai.output.messages"])
    assert [p["content"] for p in answer["parts"]] == [answering.output_text]
    (tool_call,) = json.loads(got["tool_calls"]["gen_ai.output.messages"])[0]["parts"]
    assert tool_call["arguments"] == call.arguments

    lines = [json.loads(line) for line in (tmp_path / "exchanges.jsonl").read_text().splitlines()]
    assert [line["tool_call_shapes"] for line in lines] == [["truncated"], []]
