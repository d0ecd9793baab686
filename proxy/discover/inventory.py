"""What an agent did on the wire, counted: providers, models, tools, MCP servers, tool APIs, realtime
sessions, errors, sessions.

Built from exchange summaries (see `proxy.discover.sources`), whatever source they came from.
`to_dict()` is plain JSON-ready data with every mapping sorted, so one input always gives the same
output. Tool arguments appear only as shapes (types, never values).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from brownout.core.shapes import query_shape, shape_key
from brownout.core.wire.realtime import OPERATION as REALTIME_OPERATION
from brownout.core.wire.realtime import SESSION_OPERATION

__all__ = [
    "ApiStats",
    "Inventory",
    "McpServer",
    "ModelStats",
    "ProviderStats",
    "RealtimeStats",
    "SessionStats",
    "ToolStats",
]


@dataclass
class ToolStats:
    """Calls of one tool and the argument shapes they had."""

    calls: int = 0
    shapes: Counter[str] = field(default_factory=Counter)  # shape_key -> calls
    via: set[str] = field(default_factory=set)  # providers whose models called it (LLM tools)
    declared: bool = False  # a request declared it (LLM `tools`, MCP tools/list)

    def add(self, shape: Any) -> None:
        self.calls += 1
        if shape is not None:
            self.shapes[shape_key(shape)] += 1

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"calls": self.calls, "declared": self.declared, "shapes": _shapes(self.shapes)}
        if self.via:
            out["via"] = sorted(self.via)
        return out


@dataclass
class ModelStats:
    """One model of one provider: calls, streaming, tokens, cost."""

    calls: int = 0
    streamed: int = 0
    incomplete_streams: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    tool_calls: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "streamed": self.streamed,
            "incomplete_streams": self.incomplete_streams,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": _money(self.cost_usd),
            "tool_calls": dict(sorted(self.tool_calls.items())),
        }


@dataclass
class ProviderStats:
    """An LLM provider (wire format) and what was asked of it."""

    exchanges: int = 0
    hosts: set[str] = field(default_factory=set)
    operations: Counter[str] = field(default_factory=Counter)
    models: dict[str, ModelStats] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "hosts": sorted(self.hosts),
            "operations": dict(sorted(self.operations.items())),
            "models": {m: s.to_dict() for m, s in sorted(self.models.items())},
        }


@dataclass
class McpServer:
    """An MCP server over streamable HTTP: its methods and tools."""

    exchanges: int = 0
    methods: Counter[str] = field(default_factory=Counter)
    tools: dict[str, ToolStats] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "methods": dict(sorted(self.methods.items())),
            "tools": {t: s.to_dict() for t, s in sorted(self.tools.items())},
        }


@dataclass
class ApiStats:
    """A plain HTTP tool API endpoint (host and path, without the query)."""

    tool: str | None = None
    methods: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    args: ToolStats = field(default_factory=ToolStats)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "calls": self.args.calls,
            "methods": dict(sorted(self.methods.items())),
            "statuses": dict(sorted(self.statuses.items())),
            "shapes": _shapes(self.args.shapes),
        }


@dataclass
class RealtimeStats:
    """Realtime WebSocket sessions of one provider: how many, with which models, how they ended."""

    sessions: int = 0  # opened (upstream answered the upgrade with 101)
    refused: Counter[str] = field(default_factory=Counter)  # upgrade status -> sessions refused
    hosts: set[str] = field(default_factory=set)
    models: Counter[str] = field(default_factory=Counter)  # model -> sessions
    generations: Counter[str] = field(default_factory=Counter)  # how each ended: completed, ..., cut
    closes: Counter[str] = field(default_factory=Counter)  # "1000 by client", "1006 by brownout", ...
    tool_calls: Counter[str] = field(default_factory=Counter)
    error_events: int = 0  # error events the client received
    resumed: int = 0  # sessions that resumed an earlier one
    longest_s: float = 0.0  # the longest session, upgrade to close

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "refused": dict(sorted(self.refused.items())),
            "hosts": sorted(self.hosts),
            "models": dict(sorted(self.models.items())),
            "generations": dict(sorted(self.generations.items())),
            "closes": dict(sorted(self.closes.items())),
            "tool_calls": dict(sorted(self.tool_calls.items())),
            "error_events": self.error_events,
            "resumed": self.resumed,
            "longest_s": round(self.longest_s, 3),
        }


@dataclass
class SessionStats:
    """One session: how much it did and what it used."""

    exchanges: int = 0
    llm_calls: int = 0
    tool_calls: int = 0  # executed: MCP tools/call and tool API calls
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "llm_calls": self.llm_calls,
            "tool_calls": self.tool_calls,
            "errors": self.errors,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": _money(self.cost_usd),
        }


@dataclass
class Inventory:
    """Everything observed, counted; build it with `Inventory.of(records)`."""

    exchanges: int = 0
    providers: dict[str, ProviderStats] = field(default_factory=dict)
    llm_tools: dict[str, ToolStats] = field(default_factory=dict)
    mcp_servers: dict[str, McpServer] = field(default_factory=dict)
    tool_apis: dict[tuple[str, str], ApiStats] = field(default_factory=dict)
    other_http: Counter[str] = field(default_factory=Counter)  # host -> exchanges that were no tool call
    errors: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (target, status, error type)
    faults: Counter[tuple[str, str]] = field(default_factory=Counter)  # (rule, fault type)
    retries: int = 0  # requests an SDK marked as a retry (x-stainless-retry-count > 0)
    sessions: dict[str, SessionStats] = field(default_factory=dict)
    realtime: dict[str, RealtimeStats] = field(default_factory=dict)  # by provider

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]]) -> Inventory:
        inventory = cls()
        for record in records:
            inventory.add(record)
        return inventory

    @property
    def streaming(self) -> bool:
        return any(m.streamed for p in self.providers.values() for m in p.models.values())

    @property
    def priced(self) -> bool:
        return any(s.cost_usd is not None for s in self.sessions.values())

    def add(self, r: dict[str, Any]) -> None:
        """Count one exchange summary."""
        self.exchanges += 1
        provider = str(r.get("provider") or "http")
        session = self.sessions.setdefault(str(r.get("session") or ""), SessionStats())
        session.exchanges += 1
        session.input_tokens += _int(r.get("input_tokens"))
        session.output_tokens += _int(r.get("output_tokens"))
        session.cost_usd = _add_cost(session.cost_usd, r.get("cost"))
        if (r.get("retry_count") or 0) > 0:
            self.retries += 1
        for fault in r.get("faults") or []:
            self.faults[(str(fault.get("rule")), str(fault.get("fault")))] += 1
        target = self._target(provider, r)
        failed = _failed(r)
        if failed:
            session.errors += 1
            status = r.get("status")
            self.errors[
                (target, "no response" if status is None else str(status), str(r.get("error_type") or "-"))
            ] += 1
        if r.get("operation") == SESSION_OPERATION:  # the WebSocket itself: its generations are the LLM calls
            self._realtime_session(provider, r)
        elif provider == "mcp":
            session.tool_calls += self._mcp(r)
        elif provider == "http":
            session.tool_calls += self._http(r)
        else:
            session.llm_calls += 1
            self._llm(provider, r)

    def _target(self, provider: str, r: dict[str, Any]) -> str:
        if provider == "http":
            return f"{r.get('host')}{_path(r)}"
        if provider == "mcp":
            return f"mcp {r.get('host')}:{r.get('port')}{_path(r)}"
        return f"{provider} {r.get('model') or '-'}"

    def _llm(self, provider: str, r: dict[str, Any]) -> None:
        stats = self.providers.setdefault(provider, ProviderStats())
        stats.exchanges += 1
        stats.hosts.add(f"{r.get('host')}:{r.get('port')}")
        stats.operations[str(r.get("operation") or "-")] += 1
        model = stats.models.setdefault(str(r.get("model") or "-"), ModelStats())
        model.calls += 1
        if r.get("stream"):
            model.streamed += 1
            if r.get("stream_complete") is False:
                model.incomplete_streams += 1
        model.input_tokens += _int(r.get("input_tokens"))
        model.output_tokens += _int(r.get("output_tokens"))
        model.cost_usd = _add_cost(model.cost_usd, r.get("cost"))
        for name in r.get("tools_declared") or []:
            self.llm_tools.setdefault(str(name), ToolStats()).declared = True
        for name, shape in _calls(r):
            tool = self.llm_tools.setdefault(name, ToolStats())
            tool.add(shape)
            tool.via.add(provider)
            model.tool_calls[name] += 1
        if r.get("operation") == REALTIME_OPERATION:
            realtime = self.realtime.setdefault(provider, RealtimeStats())
            status = _realtime_field(r, "status")
            realtime.generations[str(status) if status else "cut"] += 1
            realtime.tool_calls.update(name for name, _ in _calls(r))

    def _realtime_session(self, provider: str, r: dict[str, Any]) -> None:
        stats = self.realtime.setdefault(provider, RealtimeStats())
        stats.hosts.add(f"{r.get('host')}:{r.get('port')}")
        if r.get("status") != 101:
            stats.refused["no response" if r.get("status") is None else str(r.get("status"))] += 1
            return
        stats.sessions += 1
        stats.models[str(r.get("model") or "-")] += 1
        code, by = _realtime_field(r, "close_code"), _realtime_field(r, "closed_by")
        stats.closes[f"{'none' if code is None else code} by {by or '-'}"] += 1
        stats.error_events += _int(_realtime_field(r, "errors"))
        stats.resumed += bool(_realtime_field(r, "resumption_used"))
        duration = r.get("duration_s")
        if isinstance(duration, int | float) and not isinstance(duration, bool):
            stats.longest_s = max(stats.longest_s, float(duration))
        for name in r.get("tools_declared") or []:
            self.llm_tools.setdefault(str(name), ToolStats()).declared = True

    def _mcp(self, r: dict[str, Any]) -> int:
        server = self.mcp_servers.setdefault(f"{r.get('host')}:{r.get('port')}{_path(r)}", McpServer())
        server.exchanges += 1
        server.methods[str(r.get("mcp_method") or r.get("operation") or "-")] += 1
        for name in r.get("tools_declared") or []:
            server.tools.setdefault(str(name), ToolStats()).declared = True
        calls = _calls(r)
        for name, shape in calls:
            server.tools.setdefault(name, ToolStats()).add(shape)
        return len(calls)

    def _http(self, r: dict[str, Any]) -> int:
        host, path = str(r.get("host") or ""), _path(r)
        if r.get("operation") != "execute_tool":
            self.other_http[host] += 1
            return 0
        api = self.tool_apis.setdefault((host, path), ApiStats(tool=r.get("tool")))
        api.methods[str(r.get("method") or "-")] += 1
        status = r.get("status")
        api.statuses["no response" if status is None else str(status)] += 1
        shapes = r.get("tool_call_shapes") or []
        # A JSON body is the call's arguments; without one, the query parameters are.
        api.args.add(shapes[0] if shapes else query_shape(urlsplit(str(r.get("path") or "")).query))
        return 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "providers": {p: s.to_dict() for p, s in sorted(self.providers.items())},
            "llm_tools": {t: s.to_dict() for t, s in sorted(self.llm_tools.items())},
            "mcp_servers": {k: s.to_dict() for k, s in sorted(self.mcp_servers.items())},
            "tool_apis": [
                {"host": host, "path": path, **s.to_dict()} for (host, path), s in sorted(self.tool_apis.items())
            ],
            "other_http": dict(sorted(self.other_http.items())),
            "errors": [
                {"target": t, "status": s, "error_type": e, "count": n} for (t, s, e), n in sorted(self.errors.items())
            ],
            "faults": [{"rule": r, "fault": f, "count": n} for (r, f), n in sorted(self.faults.items())],
            "retries": self.retries,
            "sessions": {k: s.to_dict() for k, s in sorted(self.sessions.items())},
            "realtime": {p: s.to_dict() for p, s in sorted(self.realtime.items())},
        }


def _realtime_field(r: dict[str, Any], name: str) -> Any:
    realtime = r.get("realtime")
    return realtime.get(name) if isinstance(realtime, dict) else None


def _path(r: dict[str, Any]) -> str:
    return str(r.get("path") or "/").split("?", 1)[0]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _add_cost(total: float | None, cost: Any) -> float | None:
    if not isinstance(cost, dict) or not isinstance(cost.get("total"), int | float):
        return total
    return (total or 0.0) + float(cost["total"])


def _money(value: float | None) -> float | None:
    # Rounded so sums taken in another order (or on another machine) print the same.
    return None if value is None else round(value, 8)


def _failed(r: dict[str, Any]) -> bool:
    status = r.get("status")
    return bool(r.get("error_type")) or status is None or (isinstance(status, int) and status >= 400)


def _calls(r: dict[str, Any]) -> list[tuple[str, Any]]:
    names = [str(n) for n in r.get("tool_calls") or []]
    shapes = list(r.get("tool_call_shapes") or [])
    # Logs written before shapes were recorded have names only.
    return [(name, shapes[i] if i < len(shapes) else None) for i, name in enumerate(names)]


def _shapes(counts: Counter[str]) -> list[dict[str, Any]]:
    return [{"shape": json.loads(k), "calls": n} for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
