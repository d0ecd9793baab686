"""brownout.core.spans: GenAI semconv attributes, fault/violation events, status, and trace joining."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from brownout.core.exchange import Exchange, FaultRecord, Message, Timings, ToolCall, ToolResult, Usage
from brownout.core.span_attributes import redact_url
from brownout.core.spans import SpanBuilder, session_trace_context
from brownout.core.wire import by_provider
from brownout.invariants.records import Violation

T0 = 1_750_000_000.0


@pytest.fixture
def otel() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def chat(**fields: object) -> Exchange:
    ex = Exchange(
        id="ex-1",
        session="sess-1",
        method="POST",
        scheme="https",
        host="api.openai.com",
        port=443,
        path="/v1/chat/completions",
        provider="openai",
        operation="chat",
        model="gpt-4o-mini",
        stream=True,
        streamed=True,
        messages=[Message("user", "my email is a@b.example")],
        status=200,
        response_id="chatcmpl-1",
        response_model="gpt-4o-mini-2024-07-18",
        finish_reasons=["stop"],
        usage=Usage(12, 7, cache_read_tokens=4),
        output_text="Hi there",
        stream_complete=True,
        request_headers={"authorization": "Bearer sk-secret-secret-secret-secret", "x-api-key": "k"},
        timings=Timings(start=T0, first_client_byte=T0 + 0.25, end=T0 + 1.5),
    )
    for key, value in fields.items():
        setattr(ex, key, value)
    ex.gen_ai_provider = by_provider(ex.provider).gen_ai_provider  # as the wire format stamps it
    return ex


def violation(severity: str = "error") -> Violation:
    return Violation("no_pii", severity, "email in request body at offset 3", "sess-1", T0)


def test_chat_span_attributes_follow_genai_semconv(otel) -> None:
    provider, exporter = otel
    SpanBuilder(provider).build(chat())
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat gpt-4o-mini"
    assert span.kind is SpanKind.CLIENT
    assert span.start_time == int(T0 * 1e9) and span.end_time == int((T0 + 1.5) * 1e9)
    a = dict(span.attributes)
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert a["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert a["gen_ai.response.id"] == "chatcmpl-1"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert a["gen_ai.usage.input_tokens"] == 12 and a["gen_ai.usage.output_tokens"] == 7
    assert a["gen_ai.usage.cache_read.input_tokens"] == 4 and "gen_ai.usage.cache_creation.input_tokens" not in a
    assert a["gen_ai.request.stream"] is True
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(0.25)
    assert a["server.address"] == "api.openai.com" and a["server.port"] == 443
    assert a["http.request.method"] == "POST" and a["http.response.status_code"] == 200
    assert a["url.full"] == "https://api.openai.com/v1/chat/completions"
    assert a["brownout.session.id"] == "sess-1" and a["brownout.exchange.id"] == "ex-1"
    assert a["brownout.fault.injected"] is False
    assert "error.type" not in a
    assert span.status.status_code is StatusCode.UNSET


def test_no_content_or_credentials_unless_opted_in(otel) -> None:
    provider, exporter = otel
    SpanBuilder(provider).build(chat())
    SpanBuilder(provider, capture_content=True).build(chat())
    plain, captured = exporter.get_finished_spans()
    dumped = json.dumps(dict(plain.attributes))
    assert "a@b.example" not in dumped and "Hi there" not in dumped
    assert "gen_ai.input.messages" not in plain.attributes
    for span in (plain, captured):
        text = json.dumps(dict(span.attributes))
        assert "sk-secret" not in text and "Bearer" not in text and "authorization" not in text
    inputs = json.loads(captured.attributes["gen_ai.input.messages"])
    assert inputs[0] == {"role": "user", "parts": [{"type": "text", "content": "my email is a@b.example"}]}
    outputs = json.loads(captured.attributes["gen_ai.output.messages"])
    assert outputs[0]["parts"][0]["content"] == "Hi there" and outputs[0]["finish_reason"] == "stop"


KEY = "sk-proj-PLANTEDcontentKey0123456789abcdef"


def test_captured_content_keeps_no_api_key_or_credential_field(otel) -> None:
    provider, exporter = otel
    builder = SpanBuilder(provider, capture_content=True)
    builder.build(
        chat(
            messages=[Message("user", f"use {KEY} please")],
            tool_results=[ToolResult("c1", '{"access_token": "PLANTEDtoolToken", "ok": true}')],
            output_text=f"sure, {KEY}",
            tool_calls=[ToolCall("login", '{"user": "ada", "password": "PLANTEDpassword"}', "c2")],
        )
    )
    tool = chat(operation="execute_tool", provider="http", tool_name="login")
    tool.tool_calls, tool.output_text = [ToolCall("login", '{"password": "PLANTEDpw2"}')], f'{{"t": "{KEY}"}}'
    builder.build(tool)
    mcp = chat(provider="mcp", operation="tools/call", mcp_method="tools/call", error_type="jsonrpc")
    mcp.error_message = f"bad key {KEY}"
    mcp.notes["jsonrpc_error_code"] = -32602
    builder.build(mcp)
    spans = exporter.get_finished_spans()
    text = json.dumps([dict(s.attributes) for s in spans]) + " ".join(s.status.description or "" for s in spans)
    assert "PLANTED" not in text
    inputs = json.loads(spans[0].attributes["gen_ai.input.messages"])
    assert inputs[0]["parts"][0]["content"] == "use REDACTED please"  # the message itself stays
    assert json.loads(inputs[1]["parts"][0]["response"]) == {"access_token": "REDACTED", "ok": True}
    assert json.loads(spans[1].attributes["gen_ai.tool.call.arguments"]) == {"password": "REDACTED"}
    assert spans[2].status.description == "bad key REDACTED"


def test_a_resource_uri_keeps_no_signature(otel) -> None:
    provider, exporter = otel
    read = chat(provider="mcp", operation="resources/read", mcp_method="resources/read")
    read.notes["mcp_resource_uri"] = "https://files.example/o/report.pdf?X-Amz-Signature=PLANTEDsig&v=1"
    SpanBuilder(provider).build(read)
    (span,) = exporter.get_finished_spans()
    assert span.attributes["mcp.resource.uri"] == "https://files.example/o/report.pdf?X-Amz-Signature=REDACTED&v=1"


@pytest.mark.parametrize(
    ("provider", "operation", "expected_provider", "expected_op"),
    [
        ("openai", "responses", "openai", "chat"),
        ("anthropic", "messages", "anthropic", "chat"),
        ("gemini", "generate_content", "gcp.gemini", "generate_content"),
        ("ollama", "chat", "ollama", "chat"),
        ("openai", "embeddings", "openai", "embeddings"),
    ],
)
def test_provider_and_operation_names(otel, provider, operation, expected_provider, expected_op) -> None:
    tp, exporter = otel
    SpanBuilder(tp).build(chat(provider=provider, operation=operation, model="m-1"))
    (span,) = exporter.get_finished_spans()
    assert span.name == f"{expected_op} m-1"
    assert span.attributes["gen_ai.provider.name"] == expected_provider
    assert span.attributes["gen_ai.operation.name"] == expected_op


def test_mcp_tools_call_is_an_execute_tool_span(otel) -> None:
    tp, exporter = otel
    ex = Exchange(
        id="ex-2",
        session="s",
        method="POST",
        host="tools.local",
        port=8000,
        path="/mcp",
        provider="mcp",
        gen_ai_provider="mcp",
        operation="tools/call",
        mcp_method="tools/call",
        tool_name="get_weather",
        tool_call_id="7",
        tool_calls=[ToolCall("get_weather", '{"city":"Oslo"}', "7")],
        status=200,
        timings=Timings(start=T0, end=T0 + 0.1),
    )
    ex.notes.update(jsonrpc_id=7, mcp_session_id="abc123", mcp_protocol_version="2025-06-18")
    SpanBuilder(tp).build(ex)
    (span,) = exporter.get_finished_spans()
    # The MCP semantic conventions: `{mcp.method.name} {target}`, with the GenAI tool attributes kept.
    assert span.name == "tools/call get_weather"
    assert span.attributes["mcp.session.id"] == "abc123"
    assert span.attributes["mcp.protocol.version"] == "2025-06-18"
    assert span.attributes["jsonrpc.request.id"] == "7"
    assert span.attributes["network.transport"] == "tcp"
    assert span.attributes["network.protocol.name"] == "http"
    assert "error.type" not in span.attributes and "rpc.response.status_code" not in span.attributes
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "get_weather"
    assert span.attributes["gen_ai.tool.call.id"] == "7"
    assert span.attributes["gen_ai.provider.name"] == "mcp"
    assert span.attributes["mcp.method.name"] == "tools/call"
    assert span.attributes["url.full"] == "http://tools.local:8000/mcp"


def test_plain_http_span_name(otel) -> None:
    tp, exporter = otel
    SpanBuilder(tp).build(
        Exchange(
            id="x",
            session="s",
            method="GET",
            host="example.org",
            port=80,
            status=204,
            timings=Timings(start=T0, end=T0 + 0.01),
        )
    )
    (span,) = exporter.get_finished_spans()
    assert span.name == "GET example.org"
    assert "gen_ai.operation.name" not in span.attributes


def test_query_secrets_are_redacted() -> None:
    url = redact_url(
        "https",
        "generativelanguage.googleapis.com",
        443,
        "/v1beta/models/g:generateContent?alt=sse&key=AIzaSECRET&sig=abc&token=t&page=2",
    )
    assert "AIzaSECRET" not in url and "sig=abc" not in url and "token=t" not in url
    assert "alt=sse" in url and "page=2" in url and "key=REDACTED" in url


def test_fault_events_and_error_status(otel) -> None:
    tp, exporter = otel
    fault = FaultRecord(
        "rate-limit",
        "http_error",
        {"status": 429, "retry_after_s": 2.5, "codes": ["a", "b"], "headers": {"x": 1}},
        at=T0 + 0.001,
    )
    SpanBuilder(tp).build(chat(status=429, error_type="rate_limit_exceeded", faults=[fault], stream_complete=None))
    (span,) = exporter.get_finished_spans()
    assert span.attributes["brownout.fault.injected"] is True
    assert span.attributes["brownout.fault.rules"] == ("rate-limit",)
    assert span.attributes["error.type"] == "rate_limit_exceeded"
    (event,) = span.events
    assert event.name == "brownout.fault"
    assert event.attributes["brownout.fault.rule"] == "rate-limit"
    assert event.attributes["brownout.fault.type"] == "http_error"
    assert event.attributes["brownout.fault.param.status"] == 429
    assert event.attributes["brownout.fault.param.retry_after_s"] == 2.5
    assert event.attributes["brownout.fault.param.codes"] == ("a", "b")
    assert event.attributes["brownout.fault.param.headers"] == '{"x": 1}'
    assert span.status.status_code is StatusCode.ERROR


def test_a_skipped_fault_is_its_own_event_and_not_injected(otel) -> None:
    tp, exporter = otel
    skipped = FaultRecord("bad-json", "malformed_json", {"target": "body", "skipped": "the body is not JSON"}, at=T0)
    SpanBuilder(tp).build(chat(faults_skipped=[skipped], uninspected="decoded_too_large"))
    (span,) = exporter.get_finished_spans()
    assert span.attributes["brownout.fault.injected"] is False
    assert "brownout.fault.rules" not in span.attributes
    assert span.attributes["brownout.inspection.skipped"] == "decoded_too_large"
    (event,) = span.events
    assert event.name == "brownout.fault.skipped"
    assert event.attributes["brownout.fault.rule"] == "bad-json"
    assert event.attributes["brownout.fault.param.skipped"] == "the body is not JSON"


def test_connection_error_is_error(otel) -> None:
    tp, exporter = otel
    SpanBuilder(tp).build(chat(status=None, error_type=None))
    (span,) = exporter.get_finished_spans()
    assert span.attributes["error.type"] == "connection"
    assert span.status.status_code is StatusCode.ERROR


def test_a_violation_about_an_earlier_exchange_is_a_child_of_its_span(otel) -> None:
    tp, exporter = otel
    builder = SpanBuilder(tp, clock=lambda: T0 + 9)
    earlier, _ = builder.build(chat(id="a"))
    late = replace(violation("error"), trace_id=earlier.trace_id_hex, span_id=earlier.span_id_hex, exchange_id="a")
    builder.build(chat(id="b"), check=lambda span, _: [late])
    first, second, child = exporter.get_finished_spans()
    assert second.events == () and second.status.status_code is StatusCode.UNSET
    assert child.name == "brownout.violation no_pii" and child.kind is SpanKind.INTERNAL
    assert child.parent is not None and child.parent.span_id == first.context.span_id
    assert child.context.trace_id == first.context.trace_id and child.start_time == int((T0 + 9) * 1e9)
    assert [e.name for e in child.events] == ["brownout.violation"] and child.status.status_code is StatusCode.ERROR
    assert child.attributes["brownout.exchange.id"] == "a"


def test_violation_events_and_status(otel) -> None:
    tp, exporter = otel
    builder = SpanBuilder(tp)
    started = builder.start(chat())
    assert started.attributes["gen_ai.request.model"] == "gpt-4o-mini"  # readable before it ends
    assert exporter.get_finished_spans() == ()
    builder.finish(started, [violation("warning")])
    builder.finish(started, [violation("error")])  # idempotent: already ended
    warn_only = exporter.get_finished_spans()[0]
    assert [e.name for e in warn_only.events] == ["brownout.violation"]
    assert warn_only.events[0].attributes == {
        "brownout.violation.invariant": "no_pii",
        "brownout.violation.severity": "warning",
        "brownout.violation.message": "email in request body at offset 3",
    }
    assert warn_only.status.status_code is StatusCode.UNSET
    builder.build(chat(), [violation("critical")])
    assert exporter.get_finished_spans()[1].status.status_code is StatusCode.ERROR


def test_check_that_raises_still_ends_the_span(otel) -> None:
    tp, exporter = otel

    def boom(span, exchange):
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):  # containing it is the invariant runner's job
        SpanBuilder(tp).build(chat(), check=boom)
    assert len(exporter.get_finished_spans()) == 1


def test_joins_the_agents_trace_from_traceparent(otel) -> None:
    tp, exporter = otel
    agent_tracer = tp.get_tracer("agent")
    with agent_tracer.start_as_current_span("agent step") as agent_span:
        headers: dict[str, str] = {}
        propagate.inject(headers)  # what the agent's HTTP client sends
    SpanBuilder(tp).build(chat(traceparent=headers["traceparent"], tracestate=headers.get("tracestate")))
    agent, brownout = sorted(exporter.get_finished_spans(), key=lambda s: s.name != "agent step")
    assert brownout.context.trace_id == agent.context.trace_id == agent_span.get_span_context().trace_id
    assert brownout.parent is not None and brownout.parent.span_id == agent.context.span_id


def test_without_traceparent_one_trace_per_session(otel) -> None:
    tp, exporter = otel
    builder = SpanBuilder(tp)
    builder.build(chat(id="a", session="alpha"))
    builder.build(chat(id="b", session="alpha"))
    builder.build(chat(id="c", session="beta"))
    builder.build(chat(id="d", session="beta", traceparent="garbage"))  # invalid: falls back to the session
    a, b, c, d = exporter.get_finished_spans()
    assert a.context.trace_id == b.context.trace_id != c.context.trace_id == d.context.trace_id
    expected = trace.get_current_span(session_trace_context("alpha")).get_span_context().trace_id
    assert a.context.trace_id == expected
    assert a.context.span_id != b.context.span_id


def test_unsampled_traceparent_still_gives_a_readable_view(otel) -> None:
    tp, _exporter = otel
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
    started = SpanBuilder(tp).start(chat(traceparent=traceparent))
    assert started.trace_id_hex == "0af7651916cd43dd8448eb211c80319c"
    assert started.attributes["gen_ai.operation.name"] == "chat"
    assert not started.recording
