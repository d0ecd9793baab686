"""ExchangeSummary as JSON data and back, losslessly: the history and the invariant states a fleet shares.

Fields at their default are left out (a light summary's empty texts cost nothing); every other
field is written, so a summary read back equals the one written (tests check every field).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from brownout.core.exchange import FaultRecord, Message, ToolResult, ToolSpec
from brownout.invariants.summary import ExchangeSummary, ToolCallView

__all__ = ["dump_call", "dump_summary", "load_call", "load_summary"]


def dump_call(call: ToolCallView) -> list[Any]:
    return [call.name, call.arguments, call.id, call.from_query, call.from_object]


def load_call(data: list[Any]) -> ToolCallView:
    name, arguments, call_id, from_query, from_object = data
    return ToolCallView(name, arguments, call_id, from_query=from_query, from_object=from_object)


def _fault(data: dict[str, Any]) -> FaultRecord:
    return FaultRecord(data["rule"], data["fault"], dict(data.get("params") or {}), float(data.get("at", 0.0)))


def _dump_fault(f: FaultRecord) -> dict[str, Any]:
    return {"rule": f.rule, "fault": f.fault, "params": f.params, "at": f.at}


# Fields that are not JSON scalars: how each is written and read back.
_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "finish_reasons": (list, tuple),
    "requested_calls": (lambda v: [dump_call(c) for c in v], lambda d: tuple(load_call(c) for c in d)),
    "executed_call": (lambda v: None if v is None else dump_call(v), lambda d: None if d is None else load_call(d)),
    "tools_declared": (lambda v: [[t.name, t.schema] for t in v], lambda d: tuple(ToolSpec(n, s) for n, s in d)),
    "faults": (lambda v: [_dump_fault(f) for f in v], lambda d: tuple(_fault(f) for f in d)),
    "server_notifications": (list, tuple),
    "notifications_before": (lambda v: [[m, t] for m, t in v], lambda d: tuple((m, float(t)) for m, t in d)),
    "messages": (lambda v: [[m.role, m.text] for m in v], lambda d: tuple(Message(r, t) for r, t in d)),
    "tool_results": (
        lambda v: [[r.call_id, r.content, r.name, r.is_error] for r in v],
        lambda d: tuple(ToolResult(c, t, n, e) for c, t, n, e in d),
    ),
}
_FIELDS = tuple(
    (f.name, f.default if f.default is not dataclasses.MISSING else dataclasses.MISSING)
    for f in dataclasses.fields(ExchangeSummary)
)


def dump_summary(summary: ExchangeSummary) -> dict[str, Any]:
    """The summary as JSON data (dicts, lists, strings, numbers)."""
    out: dict[str, Any] = {}
    for name, default in _FIELDS:
        value = getattr(summary, name)
        if default is not dataclasses.MISSING and value == default:
            continue
        codec = _CODECS.get(name)
        out[name] = codec[0](value) if codec is not None else value
    return out


def load_summary(data: dict[str, Any]) -> ExchangeSummary:
    """The summary `dump_summary` wrote."""
    kwargs: dict[str, Any] = {}
    for name, _ in _FIELDS:
        if name in data:
            codec = _CODECS.get(name)
            kwargs[name] = codec[1](data[name]) if codec is not None else data[name]
    return ExchangeSummary(**kwargs)
