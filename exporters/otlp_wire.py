"""OTLP trace export requests, encoded straight to protobuf bytes.

Hand-written because of cost: the official encoder (opentelemetry-exporter-otlp-proto-common)
builds a protobuf object per span, attribute and value, about 70 us of CPU for one of brownout's
exchange spans; writing the same bytes directly takes less than half of that
(bench/otlp_encode.py). The exporter thread competes with the event loop for the GIL, so every
millisecond it spends per batch is one the proxy's requests may wait. The output is the official encoder's, message for message: tests/exporters/
test_otlp_wire.py decodes both with the real opentelemetry-proto schema and compares them.

Field numbers are those of opentelemetry/proto/{collector/trace,trace,common,resource}/v1.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind

__all__ = ["EncodedSpan", "encode_request", "encode_span", "join_request"]

_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_FIXED32 = struct.Struct("<I")
_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # SpanFlags


_SMALL = [bytes((i,)) for i in range(0x80)]  # one-byte varints: most lengths, tags and counts


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _len_field(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(payload)) + payload


def _str_field(field: int, value: str | None) -> bytes:
    return _len_field(field, value.encode()) if value else b""


def _uint_field(field: int, value: int | None) -> bytes:
    return _tag(field, 0) + _varint(value) if value else b""


def _fixed64_field(field: int, value: int | None) -> bytes:
    return _tag(field, 1) + _FIXED64.pack(value) if value else b""


def _any_value(value: Any) -> bytes:
    """An AnyValue message (its oneof is present even when it holds a default value)."""
    if type(value) is str:
        data = value.encode()
        return b"\x0a" + _varint(len(data)) + data
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, str):
        data = value.encode()
        return b"\x0a" + _varint(len(data)) + data
    if isinstance(value, int):
        if not -(1 << 63) <= value < 1 << 63:
            raise OverflowError(f"{value} does not fit an int64")
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _DOUBLE.pack(value)
    if isinstance(value, bytes):
        return b"\x3a" + _varint(len(value)) + value
    if isinstance(value, Sequence):
        return _len_field(5, b"".join(_len_field(1, _any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return _len_field(6, b"".join(_key_value(str(k), v) for k, v in value.items()))
    raise TypeError(f"invalid attribute value type {type(value).__name__}")


_KEYS: dict[str, bytes] = {}  # encoded `key` fields: a span's attribute names repeat across spans
# Whole encoded KeyValues of attributes whose values repeat (provider, operation, model, host, status):
# per key, up to _VALUES_PER_KEY values; a key seen with more (ids, counts) is not cached at all.
# Only str, int and bool values: a float's -0.0 equals 0.0 but encodes differently.
_VALUES: dict[str, dict[tuple[type, Any], bytes] | None] = {}
_VALUES_PER_KEY = 32
_CACHED_TYPES = (str, int, bool)


def _key_value(key: str, value: Any) -> bytes:
    cacheable = type(value) in _CACHED_TYPES
    values = _VALUES.get(key)
    if cacheable and values:
        cached = values.get((type(value), value))
        if cached is not None:
            return cached
    encoded = _KEYS.get(key)
    if encoded is None:
        encoded = _str_field(1, key)
        if len(_KEYS) < 4096:
            _KEYS[key] = encoded
    any_value = _any_value(value)
    inner = encoded + b"\x12" + _varint(len(any_value)) + any_value
    kv = b"\x0a" + _varint(len(inner)) + inner  # as field 1 of its parent: callers re-tag if not
    if cacheable:
        _remember(key, value, kv)
    return kv


def _remember(key: str, value: Any, kv: bytes) -> None:
    if key not in _VALUES:
        if len(_VALUES) < 4096:
            _VALUES[key] = {(type(value), value): kv}
        return
    values = _VALUES[key]
    if values is None:
        return
    if len(values) < _VALUES_PER_KEY:
        values[(type(value), value)] = kv
    else:
        _VALUES[key] = None  # too many values: an id or a count, not worth keeping


def _attributes(field: int, attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    tag = b"" if field == 1 else _tag(field, 2)
    out = []
    for key, value in attributes.items():
        try:
            kv = _key_value(key, value)
        except (TypeError, OverflowError):  # as the official encoder: the attribute is left out
            continue
        out.append(kv if field == 1 else tag + kv[1:])  # the same length-prefixed KeyValue, re-tagged
    return b"".join(out)


def _flags(context: SpanContext | None) -> bytes:
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if context is not None and context.is_remote else 0)
    return b"\x85\x01" + _FIXED32.pack(flags)  # field 16, fixed32


def _span(span: ReadableSpan) -> bytes:
    ctx = span.get_span_context()
    assert ctx is not None
    parts = [
        b"\x0a\x10" + ctx.trace_id.to_bytes(16, "big"),
        b"\x12\x08" + ctx.span_id.to_bytes(8, "big"),
        _str_field(3, ",".join(f"{k}={v}" for k, v in ctx.trace_state.items()) if ctx.trace_state else None),
        b"\x22\x08" + span.parent.span_id.to_bytes(8, "big") if span.parent else b"",
        _str_field(5, span.name),
        _uint_field(6, _KIND[span.kind]),
        _fixed64_field(7, span.start_time),
        _fixed64_field(8, span.end_time),
        _attributes(9, span.attributes),
        _uint_field(10, span.dropped_attributes),
    ]
    for event in span.events:
        body = _fixed64_field(1, event.timestamp) + _str_field(2, event.name) + _attributes(3, event.attributes)
        parts.append(_len_field(11, body + _uint_field(4, event.dropped_attributes)))
    parts.append(_uint_field(12, span.dropped_events))
    for link in span.links:
        body = (
            b"\x0a\x10"
            + link.context.trace_id.to_bytes(16, "big")
            + b"\x12\x08"
            + link.context.span_id.to_bytes(8, "big")
            + _attributes(4, link.attributes)
            + _uint_field(5, link.dropped_attributes)
            + b"\x35"  # field 6, fixed32
            + _FIXED32.pack(_HAS_IS_REMOTE | (_IS_REMOTE if link.context.is_remote else 0))
        )
        parts.append(_len_field(13, body))
    parts.append(_uint_field(14, span.dropped_links))
    status = span.status
    parts.append(_len_field(15, _str_field(2, status.description) + _uint_field(3, status.status_code.value)))
    parts.append(_flags(span.parent))
    return b"".join(parts)


def _scope(scope: InstrumentationScope | None) -> bytes:
    if scope is None:
        return b""
    return _str_field(1, scope.name) + _str_field(2, scope.version) + _attributes(3, scope.attributes)


class EncodedSpan(NamedTuple):
    """One span already encoded, with what the request groups it by."""

    resource: Resource
    scope: InstrumentationScope | None
    data: bytes


def encode_span(span: ReadableSpan) -> EncodedSpan:
    """Encode one ended span now (on the thread that ends it), to join a request later."""
    return EncodedSpan(span.resource, span.instrumentation_scope or None, _span(span))


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """An ExportTraceServiceRequest for `spans`, grouped by resource then instrumentation scope."""
    return join_request([encode_span(span) for span in spans])


def join_request(spans: Iterable[EncodedSpan]) -> bytes:
    """An ExportTraceServiceRequest of spans encoded by `encode_span`, grouped as the official encoder does."""
    # `Resource.__hash__` dumps its attributes to JSON on every call: hashing each span's resource cost the
    # worker about 4 ms of GIL time per batch of 512. Each distinct (resource, scope) pair of objects is
    # looked up once instead (a provider's spans share them); equal objects still share one group.
    grouped: dict[Resource, dict[InstrumentationScope | None, list[bytes]]] = {}
    seen: dict[tuple[int, int], tuple[Resource, InstrumentationScope | None, list[bytes]]] = {}
    for span in spans:
        key = (id(span.resource), id(span.scope))
        group = seen.get(key)
        if group is None:  # the tuple keeps both objects alive, so their ids are not reused meanwhile
            data = grouped.setdefault(span.resource, {}).setdefault(span.scope, [])
            group = seen[key] = (span.resource, span.scope, data)
        group[2].append(span.data)
    out = []
    for resource, scopes in grouped.items():
        body = [_len_field(1, _attributes(1, resource.attributes))]
        for scope, encoded in scopes.items():
            scope_spans = _len_field(1, _scope(scope)) + b"".join(_len_field(2, s) for s in encoded)
            scope_spans += _str_field(3, scope.schema_url if scope else None)
            body.append(_len_field(2, scope_spans))
        body.append(_str_field(3, resource.schema_url))
        out.append(_len_field(1, b"".join(body)))
    return b"".join(out)
