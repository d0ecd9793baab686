"""Streamed OpenAI responses: chat-completion chunks and Responses API events."""

from __future__ import annotations

from typing import Any

from brownout.core.exchange import Exchange, ToolCall
from brownout.core.wire.base import StreamEvent
from brownout.core.wire.common import BaseStreamParser
from brownout.core.wire.jsonutil import as_int

__all__ = ["RESPONSES_TERMINAL", "ChatStreamParser", "ResponsesStreamParser", "set_error", "set_usage"]

RESPONSES_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


def set_usage(exchange: Exchange, usage: dict[str, Any]) -> None:
    """Chat uses prompt/completion_tokens, Responses input/output_tokens."""
    inp = as_int(usage.get("prompt_tokens", usage.get("input_tokens")))
    out = as_int(usage.get("completion_tokens", usage.get("output_tokens")))
    if inp is not None:
        exchange.usage.input_tokens = inp
    if out is not None:
        exchange.usage.output_tokens = out
    # Cached prompt tokens are part of the input count: prompt_tokens_details (Chat), input_tokens_details (Responses).
    details = usage.get("prompt_tokens_details", usage.get("input_tokens_details"))
    cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
    if cached is not None:
        exchange.usage.cache_read_tokens = cached


def set_error(exchange: Exchange, err: Any) -> None:
    """`code` is the specific cause (rate_limit_exceeded vs insufficient_quota); `type` the family."""
    if isinstance(err, dict):
        code, etype = err.get("code"), err.get("type")
        exchange.error_type = str(code) if code not in (None, "") else str(etype or "error")
        msg = err.get("message")
        exchange.error_message = msg if isinstance(msg, str) else None
    elif isinstance(err, str):
        exchange.error_type, exchange.error_message = "error", err


class ChatStreamParser(BaseStreamParser):
    """`data: {chunk}` ... `data: [DONE]`, reassembling tool-call fragments by index."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        # (choice index, tool-call index) -> the call and its argument fragments
        self._calls: dict[tuple[int, int], tuple[ToolCall, list[str]]] = {}
        self._last: dict[int, int] = {}  # choice index -> last tool-call index seen

    def _feed(self, event: StreamEvent) -> None:
        data = event.data
        if not data.startswith("{"):
            if data.startswith("[DONE]"):
                self.exchange.stream_complete = True
            return
        chunk = self._json(data)
        if not isinstance(chunk, dict):
            return
        ex = self.exchange
        if ex.response_id is None and isinstance(chunk.get("id"), str):
            ex.response_id = chunk["id"]
        if ex.response_model is None and isinstance(chunk.get("model"), str) and chunk["model"]:
            ex.response_model = chunk["model"]
        if "error" in chunk:
            set_error(ex, chunk["error"])
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            set_usage(ex, usage)
        choices = chunk.get("choices")
        if choices and isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict):
                    self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        cidx = as_int(choice.get("index")) or 0
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if content and isinstance(content, str):
                self.text.add(content)
            tool_calls = delta.get("tool_calls")
            if tool_calls and isinstance(tool_calls, list):
                for tc in tool_calls:
                    if isinstance(tc, dict):
                        self._fragment(cidx, tc)
        elif isinstance(choice.get("text"), str):  # legacy completions stream
            self.text.add(choice["text"])
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            self.exchange.finish_reasons.append(reason)

    def _fragment(self, cidx: int, tc: dict[str, Any]) -> None:
        idx = as_int(tc.get("index"))
        if idx is None:
            # Some compatible servers omit `index`: a fragment with an id starts a new call.
            last = self._last.get(cidx)
            idx = (0 if last is None else last + 1) if tc.get("id") else (last or 0)
        self._last[cidx] = idx
        fn = tc.get("function")
        fn = fn if isinstance(fn, dict) else {}
        entry = self._calls.get((cidx, idx))
        if entry is None:
            call = ToolCall(name="", id=None, index=idx)
            self.exchange.tool_calls.append(call)
            entry = self._calls[(cidx, idx)] = (call, [])
        call = entry[0]
        # id and name come in the first fragment only; never let a later one blank them.
        if isinstance(tc.get("id"), str) and tc["id"] and call.id is None:
            call.id = tc["id"]
        name = fn.get("name")
        if isinstance(name, str) and name and not call.name:
            call.name = name
        args = fn.get("arguments")
        if isinstance(args, str) and args:
            entry[1].append(args)

    def _finish(self) -> None:
        for call, parts in self._calls.values():
            call.arguments = "".join(parts)


class ResponsesStreamParser(BaseStreamParser):
    """Responses API `response.*` events, with function-call arguments reassembled per item."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        self._calls: dict[str, tuple[ToolCall, list[str]]] = {}  # item id (or output index) -> call

    def _feed(self, event: StreamEvent) -> None:
        data = event.data
        if not data.startswith("{"):
            return
        ev = self._json(data)
        if not isinstance(ev, dict):
            return
        kind = ev.get("type") or event.event
        if not isinstance(kind, str):
            return
        if kind == "response.output_text.delta":
            delta = ev.get("delta")
            if isinstance(delta, str):
                self.text.add(delta)
        elif kind == "response.function_call_arguments.delta":
            entry = self._entry(ev)
            if entry is not None and isinstance(ev.get("delta"), str):
                entry[1].append(ev["delta"])
        elif kind == "response.function_call_arguments.done":
            entry = self._entry(ev)
            if entry is not None and isinstance(ev.get("arguments"), str):
                entry[1][:] = [ev["arguments"]]  # authoritative full text
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(ev)
        elif kind in ("response.created", "response.in_progress") or kind in RESPONSES_TERMINAL:
            self._response(ev.get("response"), terminal=kind in RESPONSES_TERMINAL)
        elif kind == "error":
            set_error(self.exchange, ev.get("error") if isinstance(ev.get("error"), dict) else ev)

    def _entry(self, ev: dict[str, Any]) -> tuple[ToolCall, list[str]] | None:
        key = ev.get("item_id")
        return self._calls.get(key if isinstance(key, str) else f"#{ev.get('output_index')}")

    def _item(self, ev: dict[str, Any]) -> None:
        item = ev.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call":
            return
        item_id = item.get("id")
        key: str = item_id if isinstance(item_id, str) else f"#{ev.get('output_index')}"
        entry = self._calls.get(key)
        if entry is None:
            call_id = item.get("call_id")
            call = ToolCall(
                name=str(item.get("name") or ""),
                id=call_id if isinstance(call_id, str) else None,
                index=len(self._calls),
            )
            self.exchange.tool_calls.append(call)
            entry = self._calls[key] = (call, [])
            # Index by output position too, for deltas that carry no item_id.
            self._calls.setdefault(f"#{ev.get('output_index')}", entry)
        args = item.get("arguments")
        if isinstance(args, str) and args:
            entry[1][:] = [args]

    def _response(self, resp: Any, terminal: bool) -> None:
        ex = self.exchange
        if not isinstance(resp, dict):
            return
        if isinstance(resp.get("id"), str):
            ex.response_id = resp["id"]
        if isinstance(resp.get("model"), str):
            ex.response_model = resp["model"]
        if not terminal:
            return
        ex.stream_complete = True
        if isinstance(resp.get("usage"), dict):
            set_usage(ex, resp["usage"])
        incomplete = resp.get("incomplete_details")
        if isinstance(incomplete, dict) and isinstance(incomplete.get("reason"), str):
            ex.finish_reasons.append(incomplete["reason"])
        elif isinstance(resp.get("status"), str):
            ex.finish_reasons.append(resp["status"])
        if isinstance(resp.get("error"), dict):
            set_error(ex, resp["error"])

    def _finish(self) -> None:
        seen: set[int] = set()
        for call, parts in self._calls.values():
            if id(call) not in seen:
                seen.add(id(call))
                call.arguments = "".join(parts)
