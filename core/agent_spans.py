"""The agent's own spans, as OTLP carries them: decoded from protobuf or OTLP JSON into `AgentSpan`s.

An agent instrumented with the GenAI conventions (or OpenInference) exports `invoke_agent`, `chat`
and `execute_tool` spans; brownout reads what the join and the invariants need from them, nothing
more: ids, timing, status, operation, provider, model, tool, token usage. Spans that are not GenAI
spans keep only their place in the tree (`genai` False), so a wire call whose `traceparent` names an
HTTP client span can still climb to the GenAI span above it.

Decoding never raises on traffic: `decode_traces` returns None for a body that is not an
ExportTraceServiceRequest (the caller records why) and skips spans with unusable ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = [
    "AGENT_OPERATIONS",
    "LLM_OPERATIONS",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "TOOL_OPERATIONS",
    "AgentSpan",
    "decode_traces",
    "spans_from_json",
    "spans_from_proto",
]

STATUS_UNSET, STATUS_OK, STATUS_ERROR = "unset", "ok", "error"
_STATUS = {0: STATUS_UNSET, 1: STATUS_OK, 2: STATUS_ERROR}
_STATUS_JSON = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
_ARGUMENTS_MAX_CHARS = 16_384  # tool-call arguments kept per span: enough to compare, bounded
# OpenInference's span kinds as GenAI operations (OpenInference instruments many agent frameworks).
_OPENINFERENCE_KINDS = {"LLM": "chat", "TOOL": "execute_tool", "AGENT": "invoke_agent", "EMBEDDING": "embeddings"}
# Attribute names, GenAI conventions first; OpenInference's and deprecated ones as fallbacks.
_PROVIDER = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_REQUEST_MODEL = ("gen_ai.request.model", "llm.model_name")
_RESPONSE_MODEL = ("gen_ai.response.model",)
_INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
_TOOL_NAME = ("gen_ai.tool.name", "tool.name")
_TOOL_CALL_ID = ("gen_ai.tool.call.id", "tool_call.id")
_TOOL_ARGUMENTS = ("gen_ai.tool.call.arguments", "tool.parameters", "input.value")


@dataclass(slots=True, frozen=True)
class AgentSpan:
    """One span of the agent's trace, reduced to what the join and the invariants read."""

    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    status: str = STATUS_UNSET  # unset | ok | error
    genai: bool = False  # a GenAI (or OpenInference) span; False: only its place in the tree is kept
    operation: str | None = None  # gen_ai.operation.name
    provider: str | None = None  # gen_ai.provider.name
    request_model: str | None = None
    response_model: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_arguments: str | None = None  # gen_ai.tool.call.arguments: only when the agent records content
    input_tokens: int | None = None
    output_tokens: int | None = None
    error_type: str | None = None
    agent_name: str | None = None
    service: str | None = None  # the resource's service.name

    @property
    def is_llm(self) -> bool:
        return self.operation in LLM_OPERATIONS

    @property
    def is_tool(self) -> bool:
        return self.operation in TOOL_OPERATIONS

    @property
    def failed(self) -> bool:
        """The agent recorded this step as failed (status ERROR, or an error.type)."""
        return self.status == STATUS_ERROR or self.error_type is not None

    @property
    def start_s(self) -> float:
        return self.start_ns / 1e9

    @property
    def end_s(self) -> float:
        return self.end_ns / 1e9


def decode_traces(body: bytes, content_type: str) -> list[AgentSpan] | None:
    """The spans of an OTLP/HTTP trace export body (protobuf, or JSON when `content_type` says so);
    None when the body is not one."""
    if "json" in content_type.lower():
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return None
        return list(spans_from_json(doc)) if isinstance(doc, dict) else None
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RecursionError):
        return None
    return list(spans_from_proto(request))


# -- protobuf ------------------------------------------------------------------------------


def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None or kind in ("kvlist_value", "bytes_value"):
        return None
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    return getattr(value, kind)


def spans_from_proto(request: ExportTraceServiceRequest) -> Iterator[AgentSpan]:
    """Every span of a decoded ExportTraceServiceRequest."""
    for rs in request.resource_spans:
        service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), None)
        for ss in rs.scope_spans:
            for span in ss.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    continue
                attrs = {a.key: _proto_value(a.value) for a in span.attributes}
                yield _agent_span(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent=span.parent_span_id.hex() if len(span.parent_span_id) == 8 else None,
                    name=span.name,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status=_STATUS.get(span.status.code, STATUS_UNSET),
                    attrs=attrs,
                    service=service,
                )


# -- OTLP JSON (hex ids, enums as numbers or names, 64-bit integers as strings) ------------


def _json_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        items = value["arrayValue"].get("values") if isinstance(value["arrayValue"], dict) else None
        return [_json_value(v) for v in items or ()]
    return None


def _json_attributes(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _json_value(item.get("value"))
    return out


def _hex_id(value: Any, digits: int) -> str | None:
    if not isinstance(value, str) or len(value) != digits:
        return None
    try:
        return None if int(value, 16) == 0 else value.lower()
    except ValueError:
        return None


def _nanos(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _json_status(status: Any) -> str:
    code = status.get("code", 0) if isinstance(status, dict) else 0
    code = _STATUS_JSON.get(code, code) if isinstance(code, str) else code
    return _STATUS.get(code, STATUS_UNSET) if isinstance(code, int) else STATUS_UNSET


def spans_from_json(doc: Mapping[str, Any]) -> Iterator[AgentSpan]:
    """Every span of an ExportTraceServiceRequest in OTLP JSON (what the collector's file exporter writes)."""
    for rs in _list(doc.get("resourceSpans")):
        resource = rs.get("resource")
        attributes = resource.get("attributes") if isinstance(resource, dict) else None
        service = _json_attributes(attributes).get("service.name")
        for ss in _list(rs.get("scopeSpans")):
            for span in _list(ss.get("spans")):
                trace_id, span_id = _hex_id(span.get("traceId"), 32), _hex_id(span.get("spanId"), 16)
                if trace_id is None or span_id is None:
                    continue
                yield _agent_span(
                    trace_id=trace_id,
                    span_id=span_id,
                    parent=_hex_id(span.get("parentSpanId"), 16),
                    name=str(span.get("name") or ""),
                    start_ns=_nanos(span.get("startTimeUnixNano")),
                    end_ns=_nanos(span.get("endTimeUnixNano")),
                    status=_json_status(span.get("status")),
                    attrs=_json_attributes(span.get("attributes")),
                    service=service if isinstance(service, str) else None,
                )


def _list(value: Any) -> Iterable[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# -- the common part -----------------------------------------------------------------------


def _first(attrs: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = attrs.get(name)
        if value is not None and value != "":
            return value
    return None


def _text(value: Any, limit: int = 512) -> str | None:
    if value is None:
        return None
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    return str(value)[:limit]


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def _agent_span(
    *,
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    start_ns: int,
    end_ns: int,
    status: str,
    attrs: Mapping[str, Any],
    service: str | None,
) -> AgentSpan:
    operation = _text(attrs.get("gen_ai.operation.name"), 64)
    if operation is None:
        operation = _OPENINFERENCE_KINDS.get(str(attrs.get("openinference.span.kind") or "").upper())
    genai = operation is not None or _first(attrs, _PROVIDER) is not None
    if not genai:
        return AgentSpan(
            trace_id, span_id, parent, name[:256], start_ns, max(start_ns, end_ns), status, service=service
        )
    arguments = _first(attrs, _TOOL_ARGUMENTS) if operation in TOOL_OPERATIONS else None
    return AgentSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name[:256],
        start_ns=start_ns,
        end_ns=max(start_ns, end_ns),
        status=status,
        genai=True,
        operation=operation,
        provider=_text(_first(attrs, _PROVIDER), 64),
        request_model=_text(_first(attrs, _REQUEST_MODEL), 256),
        response_model=_text(_first(attrs, _RESPONSE_MODEL), 256),
        tool_name=_text(_first(attrs, _TOOL_NAME), 256),
        tool_call_id=_text(_first(attrs, _TOOL_CALL_ID), 256),
        tool_arguments=_text(arguments, _ARGUMENTS_MAX_CHARS),
        input_tokens=_int(_first(attrs, _INPUT_TOKENS)),
        output_tokens=_int(_first(attrs, _OUTPUT_TOKENS)),
        error_type=_text(attrs.get("error.type"), 128),
        agent_name=_text(attrs.get("gen_ai.agent.name"), 256),
        service=service,
    )
