"""MCP spans follow the OpenTelemetry MCP semantic conventions, over streamable HTTP and stdio alike."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

from brownout.core.exchange import Exchange, Timings
from brownout.core.spans import SpanBuilder
from brownout.core.wire import by_provider
from brownout.exporters.metrics import Metrics

T0 = 1_700_000_000.0
WIRE = by_provider("mcp")


@pytest.fixture
def otel() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp, exporter


def _exchange(request: dict[str, object], reply: dict[str, object], *, transport: str = "http") -> Exchange:
    ex = Exchange(id="x", session="s", method="POST", host="tools.local", port=8000, path="/mcp", transport=transport)
    if transport == "http":
        ex.request_headers = {"mcp-session-id": "sess-9", "mcp-protocol-version": "2025-06-18"}
    ex.operation = str(request["method"])
    WIRE.parse_request(ex, json.dumps(request).encode())
    WIRE.parse_response(ex, json.dumps(reply).encode())
    ex.status = 200
    ex.timings = Timings(start=T0, end=T0 + 0.25)
    return ex


def _span(otel: tuple[TracerProvider, InMemorySpanExporter], ex: Exchange) -> object:
    tp, exporter = otel
    SpanBuilder(tp).build(ex)
    (span,) = exporter.get_finished_spans()
    return span


def test_jsonrpc_error_is_its_code(otel) -> None:
    request = {"jsonrpc": "2.0", "id": "r-1", "method": "tools/call", "params": {"name": "get_weather"}}
    reply = {"jsonrpc": "2.0", "id": "r-1", "error": {"code": -32602, "message": "Unknown tool"}}
    span = _span(otel, _exchange(request, reply))
    assert span.name == "tools/call get_weather"
    assert span.attributes["error.type"] == "-32602"
    assert span.attributes["rpc.response.status_code"] == "-32602"
    assert span.attributes["jsonrpc.request.id"] == "r-1"
    assert span.attributes["mcp.session.id"] == "sess-9"
    # The status description is the JSON-RPC error's message.
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "Unknown tool")


def test_tool_result_with_is_error_is_tool_error(otel) -> None:
    request = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_weather", "arguments": {}}}
    reply = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "down"}], "isError": True}}
    span = _span(otel, _exchange(request, reply))
    assert span.attributes["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in span.attributes
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "tool_error")
    assert (span.attributes["gen_ai.operation.name"], span.attributes["gen_ai.tool.name"]) == (
        "execute_tool",
        "get_weather",
    )


def test_stdio_span_has_no_http_attributes(otel) -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}}
    reply = {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-06-18", "capabilities": {}}}
    span = _span(otel, _exchange(init, reply, transport="stdio"))
    assert span.name == "initialize"
    assert span.attributes["network.transport"] == "pipe"
    assert span.attributes["mcp.protocol.version"] == "2025-06-18"  # the negotiated one, not the asked one
    assert span.attributes["jsonrpc.request.id"] == "0"
    for name in ("url.full", "server.address", "http.request.method", "http.response.status_code"):
        assert name not in span.attributes, name
    assert "gen_ai.operation.name" not in span.attributes  # only tool calls are execute_tool


def test_prompt_target_and_traceparent_from_meta(otel) -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    request = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "prompts/get",
        "params": {"name": "analyze-code", "_meta": {"traceparent": parent}},
    }
    span = _span(otel, _exchange(request, {"jsonrpc": "2.0", "id": 5, "result": {"messages": []}}))
    assert span.name == "prompts/get analyze-code"
    assert span.attributes["gen_ai.prompt.name"] == "analyze-code"
    assert format(span.context.trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_mcp_duration_metric_and_tool_labels() -> None:
    metrics = Metrics(registry=CollectorRegistry(), max_tools=1)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_weather", "arguments": {}}}
    ok = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
    metrics.observe_exchange(_exchange(call, ok, transport="stdio"))
    other = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {}}}
    bad = {"jsonrpc": "2.0", "id": 2, "error": {"code": -31999, "message": "odd"}}
    metrics.observe_exchange(_exchange(other, bad))
    value = metrics.registry.get_sample_value
    labels = {
        "mcp_method_name": "tools/call",
        "gen_ai_tool_name": "get_weather",
        "gen_ai_prompt_name": "",
        "rpc_response_status_code": "",
        "error_type": "",
    }
    assert value("mcp_client_operation_duration_seconds_count", {**labels, "network_transport": "pipe"}) == 1
    assert (
        value("mcp_client_operation_duration_seconds_bucket", {**labels, "network_transport": "pipe", "le": "0.2"}) == 0
    )
    # A second tool over the cap and an unknown JSON-RPC code stay bounded.
    labels = {
        "mcp_method_name": "tools/call",
        "gen_ai_tool_name": "other",
        "gen_ai_prompt_name": "",
        "rpc_response_status_code": "_OTHER",
        "error_type": "_OTHER",
    }
    assert value("mcp_client_operation_duration_seconds_count", {**labels, "network_transport": "tcp"}) == 1
    requests = {"provider": "mcp", "operation": "tools/call", "tool": "get_weather", "status_class": "2xx"}
    assert value("brownout_requests_total", requests) == 1
    assert (
        value(
            "brownout_request_duration_seconds_count", {"provider": "mcp", "operation": "tools/call", "tool": "other"}
        )
        == 1
    )


def test_mcp_duration_metric_names_the_prompt_and_the_jsonrpc_code() -> None:
    metrics = Metrics(registry=CollectorRegistry(), max_tools=1)
    for n, name in enumerate(("review", "summarise")):
        get = {"jsonrpc": "2.0", "id": n, "method": "prompts/get", "params": {"name": name}}
        bad = {"jsonrpc": "2.0", "id": n, "error": {"code": -32602, "message": "no such prompt"}}
        metrics.observe_exchange(_exchange(get, bad))
    labels = {
        "mcp_method_name": "prompts/get",
        "gen_ai_tool_name": "",
        "rpc_response_status_code": "-32602",
        "error_type": "-32602",
        "network_transport": "tcp",
    }
    count = "mcp_client_operation_duration_seconds_count"
    assert metrics.registry.get_sample_value(count, {**labels, "gen_ai_prompt_name": "review"}) == 1
    assert metrics.registry.get_sample_value(count, {**labels, "gen_ai_prompt_name": "other"}) == 1  # over the cap


@pytest.mark.parametrize(("method", "operation"), [("DELETE", "session_end"), ("GET", "server_stream")])
def test_bodiless_transport_requests_name_their_session(otel, method: str, operation: str) -> None:
    # The DELETE and the GET stream carry their session only in headers; a server need not echo it back.
    ex = Exchange(id="x", session="s", method=method, host="tools.local", port=8000, path="/mcp")
    ex.request_headers = {"mcp-session-id": "sess-9", "mcp-protocol-version": "2025-06-18"}
    ex.operation = operation
    WIRE.parse_request(ex, b"")
    ex.status, ex.timings = 200, Timings(start=T0, end=T0 + 0.01)
    span = _span(otel, ex)
    assert span.attributes["mcp.session.id"] == "sess-9"
    assert span.attributes["mcp.protocol.version"] == "2025-06-18"


def test_the_2026_methods_and_error_codes_keep_their_labels() -> None:
    metrics = Metrics(registry=CollectorRegistry())
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    refused = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "Unsupported protocol version"}}
    metrics.observe_exchange(_exchange(discover, refused))
    labels = {
        "mcp_method_name": "server/discover",
        "gen_ai_tool_name": "",
        "gen_ai_prompt_name": "",
        "rpc_response_status_code": "-32022",
        "error_type": "-32022",
        "network_transport": "tcp",
    }
    assert metrics.registry.get_sample_value("mcp_client_operation_duration_seconds_count", labels) == 1
    requests = {"provider": "mcp", "operation": "server/discover", "tool": "none", "status_class": "2xx"}
    assert metrics.registry.get_sample_value("brownout_requests_total", requests) == 1
