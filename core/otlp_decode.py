"""OTLP trace data, decoded into plain spans: from protobuf (ExportTraceServiceRequest, the real schema) and
from its JSON encodings (the collector's file exporter, Tempo's API, OTLP/HTTP JSON).

OTLP JSON writes ids as hex and 64-bit integers as strings, which protobuf's own JSON reader does not
(it takes ids as base64): so the JSON side is read here by hand. Tempo's API answers with base64 ids and
older field names (`batches`, `instrumentationLibrarySpans`): both are accepted too. Nothing here raises
on bad data: spans without usable ids are skipped.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["STATUS_ERROR", "STATUS_OK", "STATUS_UNSET", "RawSpan", "raw_from_json", "raw_from_proto", "span_id_of"]

STATUS_UNSET, STATUS_OK, STATUS_ERROR = "unset", "ok", "error"
_STATUS = {0: STATUS_UNSET, 1: STATUS_OK, 2: STATUS_ERROR}
_STATUS_JSON = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


@dataclass(slots=True)
class RawSpan:
    """One span as OTLP carries it: ids in hex, times in ns, attribute values as Python values."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    status: str
    attributes: dict[str, Any]
    service: str | None  # the resource's service.name


# -- protobuf ------------------------------------------------------------------------------


def _proto_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind is None or kind in ("kvlist_value", "bytes_value"):
        return None
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    return getattr(value, kind)


def raw_from_proto(request: ExportTraceServiceRequest, *, keys: frozenset[str] | None = None) -> Iterator[RawSpan]:
    """Every span of a decoded ExportTraceServiceRequest; with `keys`, only those attributes are converted."""
    for rs in request.resource_spans:
        service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), None)
        for ss in rs.scope_spans:
            for span in ss.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    continue
                yield RawSpan(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() if len(span.parent_span_id) == 8 else None,
                    name=span.name,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status=_STATUS.get(span.status.code, STATUS_UNSET),
                    attributes={a.key: _proto_value(a.value) for a in span.attributes if keys is None or a.key in keys},
                    service=service,
                )


# -- JSON ----------------------------------------------------------------------------------


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


def json_attributes(items: Any) -> dict[str, Any]:
    """OTLP JSON KeyValues as a dict of Python values."""
    out: dict[str, Any] = {}
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _json_value(item.get("value"))
    return out


def span_id_of(value: Any, size: int) -> str | None:
    """A trace id (size 16) or span id (8) as hex, from hex or base64 text; None when absent, zero or bad."""
    if not isinstance(value, str):
        return None
    raw: bytes | None = None
    if len(value) == size * 2:
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
    return raw.hex() if len(raw) == size and any(raw) else None


def _nanos(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _json_status(status: Any) -> str:
    code = status.get("code", 0) if isinstance(status, dict) else 0
    code = _STATUS_JSON.get(code, code) if isinstance(code, str) else code
    return _STATUS.get(code, STATUS_UNSET) if isinstance(code, int) else STATUS_UNSET


def raw_from_json(doc: Mapping[str, Any]) -> Iterator[RawSpan]:
    """Every span of an OTLP JSON document: `resourceSpans` (OTLP) or `batches` (Tempo)."""
    for rs in _list(doc.get("resourceSpans", doc.get("batches"))):
        resource = rs.get("resource")
        service = json_attributes(resource.get("attributes") if isinstance(resource, dict) else None).get(
            "service.name"
        )
        for ss in _list(rs.get("scopeSpans", rs.get("instrumentationLibrarySpans"))):
            for span in _list(ss.get("spans")):
                trace_id, span_id = span_id_of(span.get("traceId"), 16), span_id_of(span.get("spanId"), 8)
                if trace_id is None or span_id is None:
                    continue
                yield RawSpan(
                    trace_id=trace_id,
                    span_id=span_id,
                    parent_span_id=span_id_of(span.get("parentSpanId"), 8),
                    name=str(span.get("name") or ""),
                    start_ns=_nanos(span.get("startTimeUnixNano")),
                    end_ns=_nanos(span.get("endTimeUnixNano")),
                    status=_json_status(span.get("status")),
                    attributes=json_attributes(span.get("attributes")),
                    service=service if isinstance(service, str) else None,
                )


def _list(value: Any) -> Iterable[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
