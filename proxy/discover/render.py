"""The inventory as plain text for a terminal: the same bytes for the same inventory, at any width."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["render"]


def _shape(shape: Any) -> str:
    return json.dumps(shape, sort_keys=True, separators=(", ", ": "))


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} x{n}" for k, n in counts.items()) or "-"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _usd(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:.6f}"


def _shapes(lines: list[str], shapes: list[dict[str, Any]], indent: str) -> None:
    for s in shapes:
        lines.append(f"{indent}args {_shape(s['shape'])}  x{s['calls']}")


def _realtime(name: str, rt: dict[str, Any]) -> list[str]:
    refused = f"; refused {_counts(rt['refused'])}" if rt["refused"] else ""
    lines = [
        f"  {name}: {_n(rt['sessions'], 'session')} on {', '.join(rt['hosts'])}{refused}; "
        f"{_n(sum(rt['generations'].values()), 'generation')} ({_counts(rt['generations'])})"
    ]
    if rt["models"]:
        lines.append(f"    models: {_counts(rt['models'])}; longest session {rt['longest_s']:.1f} s")
    if rt["closes"]:
        lines.append(f"    ended: {_counts(rt['closes'])}")
    if rt["tool_calls"]:
        lines.append(f"    tool calls: {_counts(rt['tool_calls'])}")
    extra = [f"{_n(rt['error_events'], 'error event')} received"] if rt["error_events"] else []
    extra += [f"{rt['resumed']} resumed"] if rt["resumed"] else []
    if extra:
        lines.append(f"    {'; '.join(extra)}")
    return lines


def render(inv: dict[str, Any], *, kind: str, digest: str) -> str:
    """The inventory (`Inventory.to_dict()`) as text sections."""
    sessions = inv["sessions"]
    lines = [
        f"brownout discover: {_n(inv['exchanges'], 'exchange')} in {_n(len(sessions), 'session')} "
        f"({kind}, sha256 {digest[:16]})",
        "",
        "LLM providers",
    ]
    for name, p in inv["providers"].items():
        lines.append(
            f"  {name}: {_n(p['exchanges'], 'exchange')} on {', '.join(p['hosts'])}; {_counts(p['operations'])}"
        )
        for model, m in p["models"].items():
            cut = f", {m['incomplete_streams']} cut short" if m["incomplete_streams"] else ""
            lines.append(
                f"    {model}: {_n(m['calls'], 'call')}, {m['streamed']} streamed{cut}; "
                f"tokens {m['input_tokens']} in / {m['output_tokens']} out; {_usd(m['cost_usd'])}"
            )
            if m["tool_calls"]:
                lines.append(f"      tool calls: {_counts(m['tool_calls'])}")
    if not inv["providers"]:
        lines.append("  none")
    if inv.get("realtime"):  # only for agents that open realtime sessions
        lines += ["", "Realtime sessions (WebSocket)"]
        for name, rt in inv["realtime"].items():
            lines += _realtime(name, rt)
    lines += ["", "Tools the models called (LLM tool calls)"]
    for name, t in inv["llm_tools"].items():
        via = f" via {', '.join(t['via'])}" if t.get("via") else ""
        lines.append(f"  {name}: {_n(t['calls'], 'call')}{via}{'' if t['declared'] else ' (never declared)'}")
        _shapes(lines, t["shapes"], "    ")
    if not inv["llm_tools"]:
        lines.append("  none")
    lines += ["", "MCP servers"]
    for server, s in inv["mcp_servers"].items():
        lines.append(f"  {server}: {_n(s['exchanges'], 'exchange')}; {_counts(s['methods'])}")
        for name, t in s["tools"].items():
            lines.append(f"    tool {name}: {_n(t['calls'], 'call')}{'' if t['declared'] else ' (not listed)'}")
            _shapes(lines, t["shapes"], "      ")
    if not inv["mcp_servers"]:
        lines.append("  none")
    lines += ["", "Tool APIs"]
    for api in inv["tool_apis"]:
        lines.append(
            f"  {api['host']} {api['path']} (tool {api['tool']}): {_n(api['calls'], 'call')}; "
            f"{_counts(api['methods'])}; status {_counts(api['statuses'])}"
        )
        _shapes(lines, api["shapes"], "    ")
    if not inv["tool_apis"]:
        lines.append("  none")
    if inv["other_http"]:
        lines.append(f"  other HTTP (not tool calls): {_counts(inv['other_http'])}")
    lines += ["", "Errors seen"]
    lines += [f"  {e['target']}: {e['status']} {e['error_type']} x{e['count']}" for e in inv["errors"]] or ["  none"]
    lines += ["", "Faults seen"]
    lines += [f"  {f['rule']} ({f['fault']}) x{f['count']}" for f in inv["faults"]] or ["  none"]
    lines.append(f"  requests retried by an SDK: {inv['retries']}")
    lines += ["", "Sessions"]
    for name, s in sessions.items():
        lines.append(
            f"  {name}: {_n(s['exchanges'], 'exchange')}, {_n(s['llm_calls'], 'LLM call')}, "
            f"{_n(s['tool_calls'], 'tool call')}, {_n(s['errors'], 'error')}; tokens {s['input_tokens']} in / {s['output_tokens']} out; {_usd(s['cost_usd'])}"
        )
    if not sessions:
        lines.append("  none")
    return "\n".join(lines) + "\n"
