"""Discovery from traces the user already has: the agent's own GenAI spans, read from trace files.

Three kinds of file, told apart by their content:

- OTLP JSON lines: one ExportTraceServiceRequest per line, what the OpenTelemetry Collector's file
  exporter writes (`"resourceSpans"`);
- a Tempo JSON export: one trace as Tempo's API answers (`"batches"` or `"trace"`, base64 ids), or a
  single OTLP JSON document;
- a Jaeger JSON export: what Jaeger's UI downloads and its API answers (`"data": [{"traceID", "spans",
  "processes"}]`).

Each trace's GenAI spans become exchange summaries, the records the inventory counts: an LLM span
(`chat`, `generate_content`, ...) an LLM exchange, with the tools the `execute_tool` spans after it
ran as its tool calls; an MCP client span an MCP exchange. A trace is a session. When two
instrumentations span the same call (a framework's LLM span around the client library's), only the
innermost counts. Tools run in a trace with no model call in it are not listed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from brownout.core.agent_spans import LLM_OPERATIONS, TOOL_OPERATIONS
from brownout.core.otlp_decode import STATUS_ERROR, STATUS_OK, STATUS_UNSET, RawSpan, raw_from_json, span_id_of
from brownout.core.shapes import arguments_shape

__all__ = ["TRACE_KINDS", "TraceFileError", "read_traces", "sniff_traces"]

OTLP_LINES, TEMPO, JAEGER = "OTLP JSON", "Tempo JSON", "Jaeger JSON"
TRACE_KINDS = (OTLP_LINES, TEMPO, JAEGER)
_HEAD = 1 << 20  # enough of a file to tell its kind
_WHOLE_MAX = 512 << 20  # a single-document export read at once: bigger ones are refused
# gen_ai.provider.name (and the deprecated gen_ai.system) -> brownout's wire format, where it has one.
_PROVIDERS = {
    "openai": "openai",
    "azure.ai.openai": "openai",
    "anthropic": "anthropic",
    "gcp.gemini": "gemini",
    "gcp.vertex_ai": "gemini",
    "gcp.gen_ai": "gemini",
    "gemini": "gemini",
    "google": "gemini",
    "ollama": "ollama",
    "aws.bedrock": "bedrock",
}


class TraceFileError(ValueError):
    """A trace file that cannot be read; the message names it (and the line)."""


def sniff_traces(path: Path) -> str | None:
    """The kind of trace file `path` is (one of TRACE_KINDS), or None when it is none of them."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD)
    except OSError:
        return None
    first = head.split(b"\n", 1)[0].strip()
    if first.startswith(b"{"):
        try:
            doc = json.loads(first)
        except (ValueError, RecursionError):
            doc = None
        if isinstance(doc, dict) and "resourceSpans" in doc:
            return OTLP_LINES
    if not head.lstrip().startswith(b"{"):
        return None
    if b'"traceID"' in head and b'"spans"' in head:
        return JAEGER
    if any(key in head for key in (b'"batches"', b'"resourceSpans"', b'"trace"')):
        return TEMPO
    return None


def read_traces(path: Path, kind: str) -> Iterator[dict[str, Any]]:
    """The exchange summaries of a trace file's GenAI spans, trace by trace (TraceFileError for a bad file)."""
    spans = _otlp_lines(path) if kind == OTLP_LINES else _document(path, kind)
    by_trace: dict[str, list[RawSpan]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    for trace_id in sorted(by_trace):
        yield from _records(trace_id, by_trace[trace_id])


def _otlp_lines(path: Path) -> Iterator[RawSpan]:
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except (ValueError, RecursionError) as e:
                    raise TraceFileError(f"{path}:{n}: not an OTLP JSON line: {e}") from None
                if not isinstance(doc, dict):
                    raise TraceFileError(f"{path}:{n}: not an ExportTraceServiceRequest")
                yield from raw_from_json(doc)
    except (OSError, UnicodeDecodeError) as e:
        raise TraceFileError(f"{path}: cannot read: {e}") from e


def _document(path: Path, kind: str) -> Iterator[RawSpan]:
    try:
        if path.stat().st_size > _WHOLE_MAX:
            raise TraceFileError(f"{path}: larger than {_WHOLE_MAX >> 20} MB: export fewer traces per file")
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as e:
        raise TraceFileError(f"{path}: not a {kind} file: {e}") from e
    if not isinstance(doc, dict):
        raise TraceFileError(f"{path}: not a {kind} file")
    if kind == JAEGER:
        return _jaeger(doc)
    inner = doc.get("trace")
    return raw_from_json(inner if isinstance(inner, dict) else doc)


def _jaeger(doc: dict[str, Any]) -> Iterator[RawSpan]:
    for trace in doc.get("data") or []:
        if not isinstance(trace, dict):
            continue
        processes = trace.get("processes") if isinstance(trace.get("processes"), dict) else {}
        for span in trace.get("spans") or []:
            if not isinstance(span, dict):
                continue
            trace_id = span_id_of(str(span.get("traceID") or "").rjust(32, "0"), 16)
            span_id = span_id_of(span.get("spanID"), 8)
            if trace_id is None or span_id is None:
                continue
            tags = {t["key"]: t.get("value") for t in span.get("tags") or [] if isinstance(t, dict) and "key" in t}
            parent = next(
                (r.get("spanID") for r in span.get("references") or [] if r.get("refType") == "CHILD_OF"), None
            )
            process = processes.get(span.get("processID")) if isinstance(processes, dict) else None
            start_us, duration_us = _number(span.get("startTime")), _number(span.get("duration"))
            status_tag = str(tags.get("otel.status_code") or "").upper()
            status = STATUS_OK if status_tag == "OK" else STATUS_UNSET
            if status_tag == "ERROR" or tags.get("error") is True:
                status = STATUS_ERROR
            yield RawSpan(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=span_id_of(parent, 8),
                name=str(span.get("operationName") or ""),
                start_ns=start_us * 1000,
                end_ns=(start_us + duration_us) * 1000,
                status=status,
                attributes=tags,
                service=process.get("serviceName") if isinstance(process, dict) else None,
            )


def _number(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


# -- spans -> exchange summaries -------------------------------------------------------------


def _records(trace_id: str, spans: list[RawSpan]) -> Iterator[dict[str, Any]]:
    parents = {s.span_id: s.parent_span_id for s in spans}
    llm = [s for s in spans if _operation(s) in LLM_OPERATIONS and "mcp.method.name" not in s.attributes]
    by_id = {s.span_id: s for s in llm}
    outer: set[str] = set()  # LLM spans with another LLM span below them: the same call, spanned twice
    for span in llm:
        up, seen = parents.get(span.span_id), 0
        while up is not None and seen < 256:
            if up in by_id:
                outer.add(up)
            up, seen = parents.get(up), seen + 1
    calls = sorted((s for s in llm if s.span_id not in outer), key=lambda s: s.start_ns)
    records = [_llm_record(trace_id, s) for s in calls]
    for tool in sorted((s for s in spans if _operation(s) in TOOL_OPERATIONS), key=lambda s: s.start_ns):
        if "mcp.method.name" in tool.attributes:
            continue
        asked = [i for i, s in enumerate(calls) if s.end_ns <= tool.start_ns] or ([0] if calls else [])
        if asked:
            record = records[asked[-1]]
            record["tool_calls"].append(str(tool.attributes.get("gen_ai.tool.name") or tool.name))
            args = tool.attributes.get("gen_ai.tool.call.arguments")
            record["tool_call_shapes"].append(arguments_shape(args) if isinstance(args, str) else None)
    mcp = [_mcp_record(trace_id, s) for s in spans if isinstance(s.attributes.get("mcp.method.name"), str)]
    yield from sorted([*records, *mcp], key=lambda r: (r["timestamp"], r["id"]))


def _operation(span: RawSpan) -> str | None:
    op = span.attributes.get("gen_ai.operation.name")
    return op if isinstance(op, str) else None


def _base(trace_id: str, span: RawSpan) -> dict[str, Any]:
    a = span.attributes
    failed = span.status == STATUS_ERROR or a.get("error.type") is not None
    status = a.get("http.response.status_code")
    port = a.get("server.port")
    return {
        "id": span.span_id,
        "session": trace_id,
        "timestamp": span.start_ns / 1e9,
        "method": "POST",
        "host": str(a.get("server.address") or span.service or "-"),
        "port": port if isinstance(port, int) else 443,
        "path": "/",
        "status": status if isinstance(status, int) else (None if failed else 200),
        "error_type": (str(a.get("error.type") or "error")) if failed else None,
        "duration_s": max(0, span.end_ns - span.start_ns) / 1e9,
        "retry_count": None,
        "faults": [],
        "cost": None,
    }


def _llm_record(trace_id: str, span: RawSpan) -> dict[str, Any]:
    a = span.attributes
    provider = str(a.get("gen_ai.provider.name") or a.get("gen_ai.system") or "-")
    tokens = {k: a.get(f"gen_ai.usage.{k}") for k in ("input_tokens", "output_tokens")}
    return {
        **_base(trace_id, span),
        "provider": _PROVIDERS.get(provider, provider),
        "operation": _operation(span),
        "model": a.get("gen_ai.request.model") or a.get("gen_ai.response.model"),
        "stream": a.get("gen_ai.request.stream") is True,
        "stream_complete": None,
        "tool": None,
        "mcp_method": None,
        **{k: v if isinstance(v, int) else None for k, v in tokens.items()},
        "finish_reasons": list(_strings(a.get("gen_ai.response.finish_reasons"))),
        "tool_calls": [],
        "tool_call_shapes": [],
        "tools_declared": [],
    }


def _mcp_record(trace_id: str, span: RawSpan) -> dict[str, Any]:
    a = span.attributes
    tool = a.get("gen_ai.tool.name")
    method = str(a.get("mcp.method.name"))
    called = method == "tools/call" and isinstance(tool, str)
    return {
        **_base(trace_id, span),
        "provider": "mcp",
        "operation": method,
        "model": None,
        "stream": False,
        "stream_complete": None,
        "tool": tool if called else None,
        "mcp_method": method,
        "input_tokens": None,
        "output_tokens": None,
        "finish_reasons": [],
        "tool_calls": [tool] if called else [],
        "tool_call_shapes": [None] if called else [],
        "tools_declared": [],
    }


def _strings(value: Any) -> Iterable[str]:
    return [str(v) for v in value] if isinstance(value, list) else ([value] if isinstance(value, str) else [])
