"""An instrumented agent's load, for bench/agentspans.py: LLM calls that propagate trace context, and the
agent's own spans for them exported over OTLP/HTTP, as an instrumented agent's SDK does.

Each connection is one agent: it sends the `openai-tools` LLM call (bench/llm.py) back to back with a
`traceparent` (or without: an SDK that does not propagate, joined by time), starts a new trace every `calls_per_trace` calls (or never: a trace that never ends), and
records per call a `chat` span and the HTTP client span under it (the one `traceparent` names), plus an
`invoke_agent` span per trace. A flusher posts what was recorded every `flush_s` as one
ExportTraceServiceRequest (protobuf, the real schema), like a BatchSpanProcessor, to `otlp_url`.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass, field

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from bench.llm import CASES
from bench.load import LoadResult, _read_response

__all__ = ["AgentLoad", "run_agents"]

_CASE = CASES[0]  # openai-tools: chat completions answered with a tool call
_CHAT = [("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", "openai"), ("gen_ai.request.model", "gpt-4o-mini")]


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


@dataclass
class AgentLoad:
    """What the agents sent: calls, latencies, spans exported and export failures."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    spans: list[Span] = field(default_factory=list)
    exported: int = 0
    export_failures: int = 0

    def result(self, connections: int, elapsed: float) -> LoadResult:
        lats = self.latencies
        if len(lats) < 2:
            return LoadResult("python", connections, elapsed, len(lats), self.errors, 0.0, float("nan"), float("nan"))
        q = statistics.quantiles(lats, n=100, method="inclusive")
        rps = len(lats) / elapsed
        return LoadResult("python", connections, elapsed, len(lats), self.errors, rps, q[49] * 1000, q[98] * 1000)


def _span(
    trace: bytes, span_id: bytes, parent: bytes | None, name: str, t0: int, t1: int, attrs: list[KeyValue]
) -> Span:
    return Span(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent or b"",
        name=name,
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=t0,
        end_time_unix_nano=t1,
        attributes=attrs,
        status=Status(code=Status.STATUS_CODE_UNSET),
    )


async def _agent(
    port: int, stop_at: float, calls_per_trace: int | None, load: AgentLoad, fixed: bytes | None, propagate: bool
) -> None:
    req = _CASE.request
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    chat_attrs = [_kv(k, v) for k, v in _CHAT]
    try:
        while time.perf_counter() < stop_at:
            trace, run, run_t0, n = fixed or os.urandom(16), os.urandom(8), time.time_ns(), 0
            while time.perf_counter() < stop_at and (calls_per_trace is None or n < calls_per_trace):
                chat, http = os.urandom(8), os.urandom(8)
                context = (("traceparent", f"00-{trace.hex()}-{http.hex()}-01"),) if propagate else ()
                headers = (*req.headers, *context)
                head = type(req)(req.method, req.body, headers).head("127.0.0.1", port, _CASE.path)
                t0, w0 = time.perf_counter(), time.time_ns()
                writer.write(head + req.body)
                status = await _read_response(reader)
                w1 = time.time_ns()
                load.latencies.append(time.perf_counter() - t0)
                load.errors += not status.startswith(b"HTTP/1.1 2")
                load.spans.append(_span(trace, chat, run, "chat gpt-4o-mini", w0 - 1000, w1 + 1000, chat_attrs))
                load.spans.append(_span(trace, http, chat, "POST", w0, w1, [_kv("http.request.method", "POST")]))
                n += 1
            invoke = [_kv("gen_ai.operation.name", "invoke_agent"), _kv("gen_ai.agent.name", "bench")]
            load.spans.append(_span(trace, run, None, "invoke_agent bench", run_t0, time.time_ns(), invoke))
    finally:
        writer.close()


async def _flusher(otlp_port: int, stop: asyncio.Event, flush_s: float, load: AgentLoad) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", otlp_port)
    try:
        while True:
            stopping = stop.is_set()
            if load.spans:
                batch, load.spans = load.spans, []
                body = ExportTraceServiceRequest(
                    resource_spans=[
                        ResourceSpans(
                            resource={"attributes": [_kv("service.name", "bench-agent")]},
                            scope_spans=[ScopeSpans(spans=batch)],
                        )
                    ]
                ).SerializeToString()
                head = (
                    f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{otlp_port}\r\n"
                    f"Content-Type: application/x-protobuf\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                writer.write(head + body)
                status = await _read_response(reader)
                load.exported += len(batch)
                load.export_failures += not status.startswith(b"HTTP/1.1 2")
            if stopping:
                return
            try:
                await asyncio.wait_for(stop.wait(), flush_s)
            except TimeoutError:
                pass
    finally:
        writer.close()


async def _run(
    port: int,
    otlp_port: int,
    connections: int,
    duration_s: float,
    calls_per_trace: int | None,
    flush_s: float,
    propagate: bool,
) -> tuple[LoadResult, AgentLoad]:
    load, stop = AgentLoad(), asyncio.Event()
    flusher = asyncio.create_task(_flusher(otlp_port, stop, flush_s, load))
    t0 = time.perf_counter()
    fixed = [os.urandom(16) for _ in range(connections)] if calls_per_trace is None else [None] * connections
    agents = (_agent(port, t0 + duration_s, calls_per_trace, load, fixed[i], propagate) for i in range(connections))
    await asyncio.gather(*agents)
    elapsed = time.perf_counter() - t0
    stop.set()
    await flusher
    return load.result(connections, elapsed), load


def run_agents(
    port: int,
    otlp_port: int,
    connections: int,
    duration_s: float,
    *,
    calls_per_trace: int | None = 8,
    flush_s: float = 0.2,
    propagate: bool = True,
) -> tuple[LoadResult, AgentLoad]:
    """`connections` agents through the proxy on `port`, their spans to the OTLP/HTTP server on `otlp_port`;
    `calls_per_trace=None`: each agent's trace never ends; `propagate=False`: no traceparent (joined by time)."""
    return asyncio.run(_run(port, otlp_port, connections, duration_s, calls_per_trace, flush_s, propagate))
