"""Hand-built exchanges and a span+runner harness for invariant tests (no proxy, no network)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Coroutine
from typing import Any, Literal

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from brownout.core.exchange import (
    Exchange,
    FaultRecord,
    Message,
    RealtimeInfo,
    Timings,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
)
from brownout.core.guard import Guard
from brownout.core.spans import ExchangeSpan, SpanBuilder
from brownout.core.state.sessions import MemorySessions
from brownout.invariants.config import parse_invariants
from brownout.invariants.fleet import FleetChecks
from brownout.invariants.records import Violation
from brownout.invariants.runner import InvariantRunner

__all__ = ["T0", "Clock", "Harness", "drive", "llm", "realtime_generation", "realtime_session", "tool", "weather_tool"]

T0 = 1_750_000_000.0
_ids = itertools.count(1)


class Clock:
    """A settable clock for the runner."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def llm(
    t: float = 0.0,
    *,
    session: str = "s1",
    dur: float = 1.0,
    status: int | None = 200,
    messages: list[tuple[str, str]] | None = None,
    calls: list[tuple[str, str]] | list[tuple[str, str, str]] | None = None,
    tools: list[ToolSpec] | None = None,
    tool_results: list[ToolResult] | None = None,
    text: str = "",
    usage: tuple[int, int] | None = (10, 5),
    faults: list[FaultRecord] | None = None,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> Exchange:
    """An OpenAI chat completion exchange starting t seconds after T0."""
    n = next(_ids)
    tool_calls = [ToolCall(c[0], c[1], c[2] if len(c) > 2 else f"call_{n}_{i}", i) for i, c in enumerate(calls or [])]
    msgs = [Message(role, txt) for role, txt in (messages or [("user", "hello")])]
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": m.role, "content": m.text} for m in msgs]})
    ex = Exchange(
        id=f"ex-{n}",
        session=session,
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path="/v1/chat/completions",
        provider="openai",
        gen_ai_provider="openai",
        operation="chat",
        model="gpt-4o",
        messages=msgs,
        tools_declared=list(tools or []),
        tool_results=list(tool_results or []),
        request_body=body,
        status=status,
        response_headers=dict(headers or {}),
        response_id=f"chatcmpl-{n}",
        response_model="gpt-4o-2024-08-06",
        finish_reasons=["tool_calls" if tool_calls else "stop"] if status == 200 else [],
        usage=Usage(*usage) if usage else Usage(),
        output_text=text,
        tool_calls=tool_calls,
        faults=list(faults or []),
        timings=Timings(start=T0 + t, first_client_byte=T0 + t + dur / 2, end=T0 + t + dur),
    )
    for key, value in fields.items():
        setattr(ex, key, value)
    return ex


def tool(
    name: str,
    arguments: Any,
    t: float = 0.0,
    *,
    session: str = "s1",
    output: str = "ok",
    faults: list[FaultRecord] | None = None,
    call_id: str | None = None,
    **fields: Any,
) -> Exchange:
    """An MCP tools/call exchange."""
    n = next(_ids)
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    params = {"name": name, "arguments": arguments}
    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})
    ex = Exchange(
        id=f"ex-{n}",
        session=session,
        method="POST",
        scheme="http",
        host="tools.local",
        port=8000,
        path="/mcp",
        provider="mcp",
        gen_ai_provider="mcp",
        operation="tools/call",
        mcp_method="tools/call",
        tool_name=name,
        tool_call_id=call_id,
        tool_calls=[ToolCall(name, args, call_id)],
        request_body=body,
        status=200,
        output_text=output,
        faults=list(faults or []),
        timings=Timings(start=T0 + t, end=T0 + t + 0.05),
    )
    for key, value in fields.items():
        setattr(ex, key, value)
    return ex


def weather_tool() -> ToolSpec:
    return ToolSpec(
        "get_weather",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["city"],
            "additionalProperties": False,
        },
    )


def drive[T](coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (one on the in-process store) to its end, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise AssertionError("the coroutine waited: it needs an event loop")


class Harness:
    """SpanBuilder + InvariantRunner + in-memory exporter, wired as the addon wires them.

    `mode` "fleet" runs every exchange through the shared-session path (FleetChecks on an in-process
    store) and forgets the process's copy of the session after each one, so every exchange reads the
    session back from its JSON: each invariant's test then checks its state codec too."""

    mode: Literal["memory", "fleet"] = "memory"  # the conftest runs each invariant's tests in both

    def __init__(
        self, invariants: list[dict[str, Any]], *, mode: Literal["memory", "fleet"] | None = None, **runner_kwargs: Any
    ) -> None:
        if mode is not None:
            self.mode = mode
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.clock = runner_kwargs.pop("clock", None) or Clock()
        self.builder = SpanBuilder(provider)
        self.emitted: list[Violation] = []
        # Strict by default: an invariant bug fails the test; containment tests pass Guard().
        runner_kwargs.setdefault("guard", Guard(strict=True))
        self.runner = InvariantRunner(
            parse_invariants(invariants), clock=self.clock, on_violation=self.emitted.append, **runner_kwargs
        )
        self.states = MemorySessions(idle_s=self.runner.sessions.idle_s, max_sessions=self.runner.sessions.max_sessions)
        self.fleet = FleetChecks(self.runner, self.states)

    def run(self, exchange: Exchange) -> list[Violation]:
        """One finished exchange through start -> check -> finish; the clock follows the exchange."""
        self.clock.now = max(self.clock.now, exchange.timings.end or exchange.timings.start)
        check = self.runner.check if self.mode == "memory" else self._fleet_check
        _, violations = self.builder.build(exchange, check=check)
        return list(violations)  # type: ignore[arg-type]

    def _fleet_check(self, span: ExchangeSpan, exchange: Exchange) -> list[Violation]:
        found = drive(self.fleet.check(span, exchange))
        self.runner.sessions.discard(exchange.session)  # the next exchange reads the session back from JSON
        return found

    def close_all(self) -> list[Violation]:
        """Session-end checks of every session (memory: shutdown; fleet: every session claimed as idle)."""
        if self.mode == "memory":
            return self.runner.close_all()
        return drive(self.fleet.sweep(now=self.clock.now + 10 * self.runner.sessions.idle_s))

    def run_all(self, *exchanges: Exchange) -> list[Violation]:
        found: list[Violation] = []
        for exchange in exchanges:
            found += self.run(exchange)
        return found


def realtime_session(
    t: float,
    dur: float,
    *,
    session: str = "s1",
    sid: str = "sess_1",
    status: int = 101,
    close_code: int | None = 1000,
    closed_by: str | None = "client",
    offered: bool = False,
    used: bool = False,
    provider: str = "gemini_live",
) -> Exchange:
    """A realtime session's own exchange (the upgrade, open for `dur` seconds), as proxy/realtime.py completes it."""
    n = next(_ids)
    info = RealtimeInfo(sid, kind="session", close_code=close_code, closed_by=closed_by)
    info.resumption_offered, info.resumption_used = offered, used
    return Exchange(
        id=f"ex-{n}",
        session=session,
        method="GET",
        scheme="https",
        host="generativelanguage.googleapis.com",
        port=443,
        path="/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
        provider=provider,
        gen_ai_provider="gcp.gemini",
        operation="realtime_session",
        model="gemini-live-2.5-flash",
        status=status,
        realtime=info if status == 101 else None,
        timings=Timings(start=T0 + t, end=T0 + t + dur),
    )


def realtime_generation(t: float, dur: float = 0.5, *, session: str = "s1", sid: str = "sess_1",
                        usage: tuple[int, int] = (30, 12)) -> Exchange:  # fmt: skip
    """One generation of a realtime session."""
    n = next(_ids)
    return Exchange(
        id=f"ex-{n}",
        session=session,
        method="GET",
        host="generativelanguage.googleapis.com",
        provider="gemini_live",
        gen_ai_provider="gcp.gemini",
        operation="realtime",
        model="gemini-live-2.5-flash",
        status=101,
        stream=True,
        streamed=True,
        stream_complete=True,
        finish_reasons=["stop"],
        usage=Usage(*usage),
        realtime=RealtimeInfo(sid, status="completed"),
        timings=Timings(start=T0 + t, first_client_byte=T0 + t + 0.1, end=T0 + t + dur),
    )
