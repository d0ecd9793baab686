"""Exchange -> OpenTelemetry GenAI semantic-convention attributes (pure functions, no SDK).

`brownout.core.spans` is the only place spans are built; this module only computes what goes on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from brownout.core import secret_paths
from brownout.core.exchange import Exchange, FaultRecord
from brownout.core.secrets import is_secret_param, redact_text
from brownout.core.semconv import PINNED, Semconv, SpanNames
from brownout.core.wire.mcp_eras import MODERN

__all__ = [
    "LLM_OPERATIONS",
    "exchange_attributes",
    "fault_event_attributes",
    "mcp_target",
    "operation_name",
    "provider_name",
    "realtime_session_events",
    "redact_url",
    "span_name",
]

# Exchange.operation -> gen_ai.operation.name. The Responses API is a chat call for the semconv.
_OPERATIONS = {
    "chat": "chat",
    "responses": "chat",
    "messages": "chat",
    "text_completion": "text_completion",
    "completions": "text_completion",
    "generate": "text_completion",
    "embeddings": "embeddings",
    "embed": "embeddings",
    "generate_content": "generate_content",
    "stream_generate_content": "generate_content",
    "execute_tool": "execute_tool",
    "tools/call": "execute_tool",
    "realtime": "realtime_inference",  # one server-side generation of a realtime WebSocket session
}
LLM_OPERATIONS = frozenset({"chat", "text_completion", "embeddings", "generate_content", "realtime_inference"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_MAX_PARAM_CHARS = 1024  # fault params (e.g. injected text) are brownout's own, but keep events small


def provider_name(exchange: Exchange) -> str | None:
    """The gen_ai.provider.name for the exchange (its wire format's), or None for plain HTTP."""
    return exchange.gen_ai_provider


def operation_name(exchange: Exchange) -> str | None:
    """The gen_ai.operation.name, or None when the exchange is not a GenAI or tool call."""
    return _OPERATIONS.get(exchange.operation)


def redact_url(scheme: str, host: str, port: int, path: str) -> str:
    """url.full with credential query values replaced by REDACTED (as the HTTP semconv asks)."""
    base, sep, query = path.partition("?")
    netloc = host if port in (0, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    url = f"{scheme}://{netloc}{base or '/'}"
    if not sep:
        return url
    pairs = [(k, "REDACTED" if is_secret_param(k) else v) for k, v in parse_qsl(query, keep_blank_values=True)]
    return f"{url}?{urlencode(pairs, quote_via=quote, safe='/:')}"


def mcp_target(exchange: Exchange) -> str | None:
    """The low-cardinality target of an MCP span name: the tool or prompt the request names."""
    return exchange.tool_name or exchange.notes.get("mcp_prompt_name")


def span_name(exchange: Exchange) -> str:
    """`{mcp.method.name} {target}` for MCP, `{operation} {model}` for LLM calls, `execute_tool {tool}`
    for other tools, else `{method} {host}`."""
    if exchange.mcp_method:
        target = mcp_target(exchange)
        return f"{exchange.mcp_method} {target}" if target else exchange.mcp_method
    op = operation_name(exchange)
    if op == "execute_tool":
        return f"execute_tool {exchange.tool_name}" if exchange.tool_name else "execute_tool"
    if op is not None:
        return f"{op} {exchange.model}" if exchange.model else op
    if exchange.transport == "stdio":
        return exchange.operation
    if exchange.realtime is not None and exchange.realtime.kind == "session":
        # The WebSocket connection itself (not a GenAI operation: its generations are the spans).
        return f"realtime_session {exchange.model}" if exchange.model else "realtime_session"
    return f"{exchange.method} {exchange.host}"


def error_type(exchange: Exchange) -> str | None:
    """error.type: the provider/transport error, else the status code for HTTP errors.

    MCP follows its conventions: a JSON-RPC error is its code as a string (`-32602`), a tool
    result with isError is `tool_error`."""
    code = exchange.notes.get("jsonrpc_error_code") if exchange.provider == "mcp" else None
    if exchange.error_type and isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    if exchange.error_type:
        return exchange.error_type
    if exchange.status is None:
        return "connection" if exchange.timings.end is not None else None
    return str(exchange.status) if exchange.status >= 400 else None


def exchange_attributes(
    exchange: Exchange, *, capture_content: bool = False, semconv: Semconv = PINNED
) -> dict[str, Any]:
    """Every span attribute for the exchange, GenAI ones named as `semconv` names them; never
    credentials, prompts only with capture_content."""
    op = operation_name(exchange)
    names = semconv.spans
    attrs: dict[str, Any] = {
        "brownout.session.id": exchange.session,
        "brownout.exchange.id": exchange.id,
        "brownout.provider": exchange.provider,
        "brownout.operation": exchange.operation,
        "brownout.fault.injected": exchange.fault_injected,
    }
    if exchange.transport == "http":
        attrs["server.address"] = exchange.host
        attrs["http.request.method"] = exchange.method
        attrs["url.full"] = redact_url(exchange.scheme, exchange.host, exchange.port, exchange.path)
        if exchange.port:
            attrs["server.port"] = exchange.port
        if exchange.status is not None:
            attrs["http.response.status_code"] = exchange.status
    if (provider := provider_name(exchange)) is not None:
        attrs[names.provider_name] = provider
    if op is not None:
        attrs[names.operation_name] = op
    if (err := error_type(exchange)) is not None:
        attrs["error.type"] = err
    if exchange.faults:
        attrs["brownout.fault.rules"] = tuple(dict.fromkeys(f.rule for f in exchange.faults))
        attrs["brownout.fault.types"] = tuple(dict.fromkeys(f.fault for f in exchange.faults))
    if exchange.mcp_method or exchange.provider == "mcp":
        _mcp_attributes(exchange, attrs, names)
    if exchange.retry_count is not None:
        attrs["brownout.client.retry_count"] = exchange.retry_count
    if exchange.stream_complete is not None:
        attrs["brownout.stream.complete"] = exchange.stream_complete
    if exchange.replayed:
        attrs["brownout.replayed"] = True
    if exchange.uninspected is not None:
        attrs["brownout.inspection.skipped"] = exchange.uninspected
    if op == "execute_tool":
        _tool_attributes(exchange, attrs, capture_content, names)
    elif op is not None:
        _llm_attributes(exchange, attrs, capture_content, semconv)
    if exchange.realtime is not None:
        _realtime_attributes(exchange, attrs, names)
    return attrs


def _realtime_attributes(exchange: Exchange, attrs: dict[str, Any], names: SpanNames) -> None:
    info = exchange.realtime
    assert info is not None
    attrs[names.live_session_id] = info.session_id
    if info.status is not None:
        attrs["brownout.realtime.status"] = info.status
    if info.kind != "session":
        return
    if exchange.model:
        attrs[names.request_model] = exchange.model
    if info.close_code is not None:
        attrs["brownout.realtime.close_code"] = info.close_code
    if info.closed_by is not None:
        attrs["brownout.realtime.closed_by"] = info.closed_by
    attrs["brownout.realtime.generations"] = info.generations
    attrs["brownout.realtime.events.client"] = info.events_client
    attrs["brownout.realtime.events.server"] = info.events_server
    if info.errors:
        attrs["brownout.realtime.errors"] = info.errors
    if info.resumption_offered:
        attrs["brownout.realtime.resumption.offered"] = True
    if info.resumption_used:
        attrs["brownout.realtime.resumption.used"] = True


def realtime_session_events(exchange: Exchange, semconv: Semconv = PINNED) -> list[tuple[str, float, dict[str, Any]]]:
    """A session's start and end events (GenAI realtime conventions), as (name, time, attributes)."""
    info = exchange.realtime
    if info is None or info.kind != "session" or exchange.status != 101:
        return []
    names = semconv.spans
    attrs: dict[str, Any] = {names.live_session_id: info.session_id, "server.address": exchange.host}
    if exchange.gen_ai_provider:
        attrs[names.provider_name] = exchange.gen_ai_provider
    if exchange.model:
        attrs[names.request_model] = exchange.model
    if exchange.port:
        attrs["server.port"] = exchange.port
    events = [(names.live_session_started_event, exchange.timings.start, attrs)]
    if exchange.timings.end is not None:
        ended = dict(attrs)
        if info.close_code is not None:
            ended["brownout.realtime.close_code"] = info.close_code
        events.append((names.live_session_ended_event, exchange.timings.end, ended))
    return events


def _mcp_attributes(exchange: Exchange, attrs: dict[str, Any], names: SpanNames) -> None:
    """The MCP semantic conventions' client-span attributes (the GenAI tool ones come with execute_tool)."""
    notes = exchange.notes
    if exchange.mcp_method:
        attrs["mcp.method.name"] = exchange.mcp_method
    session = notes.get("mcp_session_id") or exchange.response_headers.get("mcp-session-id")
    if session and exchange.mcp_era != MODERN:  # the conventions forbid it for 2026-07-28: there are no sessions
        attrs["mcp.session.id"] = session
    if version := notes.get("mcp_protocol_version"):
        attrs["mcp.protocol.version"] = version
    request_id = notes.get("jsonrpc_id")
    if request_id is not None and not isinstance(request_id, bool):
        attrs["jsonrpc.request.id"] = str(request_id)
    code = notes.get("jsonrpc_error_code")
    if isinstance(code, int) and not isinstance(code, bool):
        attrs["rpc.response.status_code"] = str(code)
    if prompt := notes.get("mcp_prompt_name"):
        attrs[names.prompt_name] = prompt
    if uri := notes.get("mcp_resource_uri"):
        attrs["mcp.resource.uri"] = secret_paths.redact_url(str(uri))  # a signed URL's token stays behind
    if exchange.transport == "stdio":
        attrs["network.transport"] = "pipe"
    else:
        attrs["network.transport"] = "tcp"
        attrs["network.protocol.name"] = "http"


def _llm_attributes(exchange: Exchange, attrs: dict[str, Any], capture_content: bool, semconv: Semconv) -> None:
    names = semconv.spans
    if exchange.model:
        attrs[names.request_model] = exchange.model
    attrs[names.request_stream] = exchange.stream
    if exchange.response_model:
        attrs[names.response_model] = exchange.response_model
    if exchange.response_id:
        attrs[names.response_id] = exchange.response_id
    if exchange.finish_reasons:
        attrs[names.response_finish_reasons] = tuple(str(r) for r in exchange.finish_reasons)
    usage = exchange.usage
    if usage.input_tokens is not None:
        attrs[names.usage_input_tokens] = usage.input_tokens
    if usage.output_tokens is not None:
        attrs[names.usage_output_tokens] = usage.output_tokens
    if usage.cache_read_tokens is not None:
        attrs[names.usage_cache_read_input_tokens] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        attrs[names.usage_cache_write_input_tokens] = usage.cache_write_tokens
    if exchange.cost is not None:
        attrs["brownout.cost.total"] = exchange.cost.total
        attrs["brownout.cost.input"] = exchange.cost.input
        attrs["brownout.cost.output"] = exchange.cost.output
        attrs["brownout.cost.currency"] = exchange.cost.currency
    ttfc = exchange.timings.ttfc_s
    if (exchange.stream or exchange.streamed) and ttfc is not None:
        attrs[names.response_time_to_first_chunk] = ttfc
    if capture_content:  # content, yes; credentials in it, never (see redact_text)
        attrs[names.input_messages] = _input_messages(exchange)
        attrs[names.output_messages] = _output_messages(exchange, semconv.output_finish_reason)


def _tool_attributes(exchange: Exchange, attrs: dict[str, Any], capture_content: bool, names: SpanNames) -> None:
    call = exchange.tool_calls[0] if exchange.tool_calls else None
    name = exchange.tool_name or (call.name if call else None)
    if name:
        attrs[names.tool_name] = name
    call_id = exchange.tool_call_id or (call.id if call else None)
    if call_id:
        attrs[names.tool_call_id] = call_id
    if capture_content:  # content, yes; credentials in it, never (see redact_text)
        if call is not None:
            attrs[names.tool_call_arguments] = redact_text(call.arguments)
        attrs[names.tool_call_result] = redact_text(exchange.output_text)


def _input_messages(exchange: Exchange) -> str:
    messages: list[dict[str, Any]] = [
        {"role": m.role, "parts": [{"type": "text", "content": redact_text(m.text)}]} for m in exchange.messages
    ]
    for result in exchange.tool_results:
        part = {"type": "tool_call_response", "id": result.call_id, "response": redact_text(result.content)}
        messages.append({"role": "tool", "parts": [part]})
    return json.dumps(messages, ensure_ascii=False)


def _output_messages(exchange: Exchange, with_finish_reason: bool) -> str:
    parts: list[dict[str, Any]] = []
    if exchange.output_text:
        parts.append({"type": "text", "content": redact_text(exchange.output_text)})
    for call in exchange.tool_calls:
        arguments = redact_text(call.arguments)
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments})
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    if with_finish_reason and exchange.finish_reasons:  # later versions: gen_ai.response.finish_reasons only
        message["finish_reason"] = exchange.finish_reasons[0]
    return json.dumps([message], ensure_ascii=False)


def fault_event_attributes(fault: FaultRecord) -> dict[str, Any]:
    """The `brownout.fault` event's attributes, params flattened to OTel-valid values."""
    attrs: dict[str, Any] = {"brownout.fault.rule": fault.rule, "brownout.fault.type": fault.fault}
    for key, value in fault.params.items():
        attrs[f"brownout.fault.param.{key}"] = _attribute_value(value)
    return attrs


def _attribute_value(value: Any) -> Any:
    if isinstance(value, str):
        return value[:_MAX_PARAM_CHARS]
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, Sequence) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    numbers = isinstance(value, Sequence) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    if numbers and value:
        # OTel arrays must be homogeneous: a mix of ints and floats becomes floats.
        return tuple(value) if all(isinstance(v, int) for v in value) else tuple(float(v) for v in value)
    if isinstance(value, Mapping | Sequence):
        return json.dumps(value, default=str, sort_keys=True)[:_MAX_PARAM_CHARS]
    return str(value)[:_MAX_PARAM_CHARS]
