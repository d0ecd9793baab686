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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from brownout.core.otlp_decode import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    RawSpan,
    raw_from_json,
    raw_from_proto,
)

__all__ = [
    "AGENT_OPERATIONS",
    "LLM_OPERATIONS",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "TOOL_OPERATIONS",
    "AgentSpan",
    "agent_span",
    "decode_traces",
    "spans_from_json",
    "spans_from_proto",
]


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
# Every attribute read here: the others are never converted from protobuf.
_KEYS = frozenset(
    (
        *_PROVIDER, *_REQUEST_MODEL, *_RESPONSE_MODEL, *_INPUT_TOKENS, *_OUTPUT_TOKENS, *_TOOL_NAME, *_TOOL_CALL_ID,
        *_TOOL_ARGUMENTS, "gen_ai.operation.name", "openinference.span.kind", "error.type", "gen_ai.agent.name",
    )
)  # fmt: skip


@dataclass(slots=True)
class AgentSpan:
    """One span of the agent's trace, reduced to what the join and the invariants read (read-only by
    convention: not frozen, since a frozen dataclass's __init__ costs several times more per span)."""

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
    service: str | None = None  # the resource's service.name (GenAI spans only)

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


def spans_from_proto(request: ExportTraceServiceRequest) -> Iterator[AgentSpan]:
    """Every span of a decoded ExportTraceServiceRequest."""
    return (agent_span(raw) for raw in raw_from_proto(request, keys=_KEYS))


def spans_from_json(doc: Mapping[str, Any]) -> Iterator[AgentSpan]:
    """Every span of an ExportTraceServiceRequest in OTLP JSON (what the collector's file exporter writes)."""
    return (agent_span(raw) for raw in raw_from_json(doc))


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


def agent_span(raw: RawSpan) -> AgentSpan:
    """What the join and the invariants read of a span (only its place in the tree, for one not GenAI)."""
    attrs = raw.attributes
    operation = _text(attrs.get("gen_ai.operation.name"), 64)
    if operation is None:
        operation = _OPENINFERENCE_KINDS.get(str(attrs.get("openinference.span.kind") or "").upper())
    end_ns = max(raw.start_ns, raw.end_ns)
    if operation is None and _first(attrs, _PROVIDER) is None:
        name = raw.name[:256]
        return AgentSpan(raw.trace_id, raw.span_id, raw.parent_span_id, name, raw.start_ns, end_ns, raw.status, False)
    arguments = _first(attrs, _TOOL_ARGUMENTS) if operation in TOOL_OPERATIONS else None
    return AgentSpan(
        raw.trace_id,
        raw.span_id,
        raw.parent_span_id,
        raw.name[:256],
        raw.start_ns,
        end_ns,
        raw.status,
        True,
        operation,
        _text(_first(attrs, _PROVIDER), 64),
        _text(_first(attrs, _REQUEST_MODEL), 256),
        _text(_first(attrs, _RESPONSE_MODEL), 256),
        _text(_first(attrs, _TOOL_NAME), 256),
        _text(_first(attrs, _TOOL_CALL_ID), 256),
        _text(arguments, _ARGUMENTS_MAX_CHARS),
        _int(_first(attrs, _INPUT_TOKENS)),
        _int(_first(attrs, _OUTPUT_TOKENS)),
        _text(attrs.get("error.type"), 128),
        _text(attrs.get("gen_ai.agent.name"), 256),
        raw.service,
    )
