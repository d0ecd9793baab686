"""Realtime clients through a real brownout: the openai SDK's realtime client and google-genai's live client,
pointed at the mock upstream (TLS) with nothing but the proxy environment (HTTPS_PROXY, SSL_CERT_FILE)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from brownout.core.exchange import Exchange
from brownout.proxy.embed import ProxyHandle

__all__ = [
    "WEATHER_TOOL",
    "Recorder",
    "ask_weather",
    "gemini_session",
    "gemini_weather_turn",
    "openai_realtime",
    "proxy_environment",
    "until",
    "wait_for",
]

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER = {"city": "Paris", "temp_c": 18, "conditions": "cloudy"}


def proxy_environment(monkeypatch: pytest.MonkeyPatch, proxy: ProxyHandle) -> None:
    """What `brownout env` prints: the clients find the proxy and its CA here and nowhere else."""
    for name, value in proxy.env.items():
        monkeypatch.setenv(name, value)


class Recorder:
    """Exchanges and spans of one proxy, as the pipeline finishes them."""

    def __init__(self, proxy: ProxyHandle) -> None:
        self.proxy = proxy
        self.spans_exporter = InMemorySpanExporter()
        proxy.addon.pipeline.exporters.add_span_processor(SimpleSpanProcessor(self.spans_exporter))
        self.exchanges: list[Exchange] = []
        proxy.addon.pipeline.listeners.append(self.exchanges.append)

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_exporter.get_finished_spans())

    def sessions(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.realtime is not None and e.realtime.kind == "session"]

    def generations(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.realtime is not None and e.realtime.kind == "generation"]

    def metric(self, name: str, labels: dict[str, str]) -> float:
        value = self.proxy.addon.pipeline.exporters.metrics.registry.get_sample_value(name, labels)
        return value or 0.0

    def violations(self) -> list[Any]:
        return self.proxy.addon.pipeline.exporters.recent_violations()


def wait_for(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


@contextmanager
def openai_realtime(upstream: Any, model: str = "gpt-realtime", *, tools: bool = True, **connect: Any) -> Iterator[Any]:
    """A realtime connection with the openai SDK, configured for text (and the weather tool, unless not `tools`:
    the mock then answers in text)."""
    client = openai.OpenAI(base_url=f"{upstream.url}/v1", api_key="sk-test", max_retries=0)
    with client.realtime.connect(model=model, **connect) as conn:
        declared = [WEATHER_TOOL] if tools else []
        conn.session.update(session={"type": "realtime", "output_modalities": ["text"], "tools": declared})
        yield conn


def until(conn: Any, kind: str) -> list[Any]:
    """Events up to and including the first of `kind`."""
    seen = []
    for event in conn:
        seen.append(event)
        if event.type == kind:
            return seen
    raise AssertionError(f"the connection ended before {kind}: {[e.type for e in seen]}")


def ask_weather(conn: Any) -> tuple[list[Any], list[Any]]:
    """One agent turn: the model calls get_weather, the agent answers it, the model speaks. Both event lists."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]}
    conn.conversation.item.create(item=item)
    conn.response.create()
    first = until(conn, "response.done")
    call = next(e for e in first if e.type == "response.function_call_arguments.done")
    output = {"type": "function_call_output", "call_id": call.call_id, "output": json.dumps(WEATHER)}
    conn.conversation.item.create(item=output)
    conn.response.create()
    return first, until(conn, "response.done")


def gemini_session(upstream: Any, body: Callable[[Any], Any], *, resume: str | None = None) -> Any:
    """Run `body(session)` (a coroutine function) in a google-genai live session with the weather tool."""
    from google import genai
    from google.genai import types

    async def main() -> Any:
        client = genai.Client(api_key="test-key", http_options=types.HttpOptions(base_url=upstream.url))
        decl = types.FunctionDeclaration(
            name="get_weather",
            parameters=types.Schema(type="OBJECT", properties={"city": types.Schema(type="STRING")}),
        )
        config = types.LiveConnectConfig(
            response_modalities=["TEXT"],
            tools=[types.Tool(function_declarations=[decl])],
            session_resumption=types.SessionResumptionConfig(handle=resume),
        )
        async with client.aio.live.connect(model="gemini-live-2.5-flash", config=config) as session:
            return await body(session)

    return asyncio.run(main())


async def gemini_weather_turn(session: Any, got: list[Any] | None = None) -> list[Any]:
    """One turn with a tool call answered: every message the client received, also appended to `got` as it
    arrives (so a caller keeps what came before an error that ends the turn)."""
    from google.genai import types

    got = [] if got is None else got
    await session.send_client_content(
        turns=types.Content(role="user", parts=[types.Part(text="Weather in Paris?")]), turn_complete=True
    )
    async for msg in session.receive():
        got.append(msg)
        if msg.tool_call:
            call = msg.tool_call.function_calls[0]
            response = types.FunctionResponse(id=call.id, name=call.name, response={"result": WEATHER})
            await session.send_tool_response(function_responses=[response])
            break
    async for msg in session.receive():
        got.append(msg)
    return got
