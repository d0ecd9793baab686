"""OpenAI requests: chat completions' and Responses' declared tools, messages and tool results."""

from __future__ import annotations

from typing import Any

from brownout.core.exchange import Exchange, Message, ToolResult, ToolSpec
from brownout.core.wire.jsonutil import as_list, text_of

__all__ = ["chat_request", "responses_request"]


def chat_request(exchange: Exchange, data: dict[str, Any]) -> None:
    """Fill the exchange from a chat completions request (and the legacy functions API)."""
    opts = data.get("stream_options")
    if isinstance(opts, dict) and opts.get("include_usage"):
        exchange.notes["openai_include_usage"] = True  # empty_response() mirrors the usage chunk
    for tool in as_list(data.get("tools")):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            exchange.tools_declared.append(ToolSpec(fn["name"], params if isinstance(params, dict) else None))
    for fn in as_list(data.get("functions")):  # the deprecated function-calling API
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            exchange.tools_declared.append(ToolSpec(fn["name"], params if isinstance(params, dict) else None))
    names: dict[str, str] = {}  # tool_call_id -> name, so results can name their tool
    for msg in as_list(data.get("messages")):
        if not isinstance(msg, dict):
            continue
        role = str(msg.get("role") or "")
        text = text_of(msg.get("content"))
        exchange.messages.append(Message(role, text))
        for tc in as_list(msg.get("tool_calls")):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict) and isinstance(tc.get("id"), str):
                names[tc["id"]] = str(fn.get("name") or "")
        if role in ("tool", "function"):
            call_id = msg.get("tool_call_id")
            call_id = call_id if isinstance(call_id, str) else None
            name = msg.get("name") if isinstance(msg.get("name"), str) else names.get(call_id or "")
            exchange.tool_results.append(ToolResult(call_id, text, name))


def responses_request(exchange: Exchange, data: dict[str, Any]) -> None:
    """Fill the exchange from a Responses request: flat function tools, instructions, input items."""
    for tool in as_list(data.get("tools")):
        # Responses tools are flat: {"type": "function", "name", "parameters"}.
        if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("name"), str):
            params = tool.get("parameters")
            exchange.tools_declared.append(ToolSpec(tool["name"], params if isinstance(params, dict) else None))
    if isinstance(data.get("instructions"), str):
        exchange.messages.append(Message("system", data["instructions"]))
    items = data.get("input")
    if isinstance(items, str):
        exchange.messages.append(Message("user", items))
        return
    names: dict[str, str] = {}
    for item in as_list(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "function_call":
            names[str(item.get("call_id"))] = str(item.get("name") or "")
        elif kind == "function_call_output":
            call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
            output = item.get("output")
            text = output if isinstance(output, str) else text_of(output)
            exchange.tool_results.append(ToolResult(call_id, text, names.get(call_id or "")))
            exchange.messages.append(Message("tool", text))
        elif "role" in item:
            exchange.messages.append(Message(str(item["role"]), text_of(item.get("content"))))
