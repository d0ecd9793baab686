"""Anthropic Messages API (/v1/messages), direct or through Vertex AI's rawPredict."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from brownout.core.exchange import Exchange, Message, ToolCall, ToolResult, ToolSpec
from brownout.core.wire import anthropic_edits, anthropic_faults
from brownout.core.wire.anthropic_history import AnthropicHistory
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import BaseStreamParser, ProviderFormat
from brownout.core.wire.edits import EditPlaces
from brownout.core.wire.history import RequestHistory
from brownout.core.wire.jsonutil import as_int, as_list, cap_text, dumps, text_of

__all__ = ["AnthropicFormat", "AnthropicStreamParser"]

log = logging.getLogger(__name__)

_VERTEX = "/publishers/anthropic/models/"


def _set_usage(exchange: Exchange, reported: dict[str, Any]) -> None:
    # Anthropic's input_tokens leaves out the cached prompt tokens; the GenAI conventions (and the price
    # table) count them as input, with the cache reads and writes as parts of it.
    usage = exchange.usage
    write, read = as_int(reported.get("cache_creation_input_tokens")), as_int(reported.get("cache_read_input_tokens"))
    if write is not None:
        usage.cache_write_tokens = write
    if read is not None:
        usage.cache_read_tokens = read
    detail = reported.get("cache_creation")  # the writes by lifetime: 5 minutes or 1 hour
    hour = as_int(detail.get("ephemeral_1h_input_tokens")) if isinstance(detail, dict) else None
    if hour is not None:
        usage.cache_write_1h_tokens = hour
    base = as_int(reported.get("input_tokens"))
    if base is not None:
        usage.input_tokens = base + (usage.cache_write_tokens or 0) + (usage.cache_read_tokens or 0)
    out = as_int(reported.get("output_tokens"))
    if out is not None:
        usage.output_tokens = out


def _set_error(exchange: Exchange, err: Any) -> None:
    if isinstance(err, dict):
        exchange.error_type = str(err.get("type") or "error")
        msg = err.get("message")
        exchange.error_message = msg if isinstance(msg, str) else None


class AnthropicFormat(ProviderFormat):
    """Claude's Messages API: content blocks, tool_use, and named SSE events."""

    provider = "anthropic"
    gen_ai_provider = "anthropic"
    edit_places: ClassVar[EditPlaces | None] = anthropic_edits
    calls_tools = True
    replay_fields = frozenset(["model", "messages", "system", "tools", "tool_choice", "stream", "thinking"])

    def recognise(self, req: RequestInfo) -> str | None:
        if req.method != "POST":
            return None
        path = req.path.rstrip("/")
        if path.endswith("/v1/messages") or (_VERTEX in path and "Predict" in path):
            return "chat"
        return None

    def _request(self, exchange: Exchange, data: Any) -> None:
        if not isinstance(data, dict):
            return
        path = exchange.path.split("?", 1)[0]
        model = data.get("model")
        if isinstance(model, str):
            exchange.model = model
        elif _VERTEX in path:
            exchange.model = path.rsplit("/", 1)[-1].split(":", 1)[0] or None
        exchange.stream = data.get("stream") is True or path.endswith(":streamRawPredict")
        for tool in as_list(data.get("tools")):
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                schema = tool.get("input_schema")  # server tools (web_search, ...) have none
                exchange.tools_declared.append(ToolSpec(tool["name"], schema if isinstance(schema, dict) else None))
        system = data.get("system")
        if system:
            exchange.messages.append(Message("system", text_of(system)))
        names: dict[str, str] = {}  # tool_use id -> name, so results can name their tool
        for msg in as_list(data.get("messages")):
            if not isinstance(msg, dict):
                continue
            role, content = str(msg.get("role") or ""), msg.get("content")
            exchange.messages.append(Message(role, text_of(content)))
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "tool_use" and isinstance(block.get("id"), str):
                    names[block["id"]] = str(block.get("name") or "")
                elif kind == "tool_result":
                    call_id = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
                    exchange.tool_results.append(
                        ToolResult(
                            call_id,
                            text_of(block.get("content")),
                            names.get(call_id or ""),
                            block.get("is_error") is True,
                        )
                    )

    def read_request(self, exchange: Exchange, data: Any) -> None:
        """Fill the exchange from a decoded Messages request (Bedrock's InvokeModel carries one)."""
        self._request(exchange, data)

    def read_response(self, exchange: Exchange, data: Any) -> None:
        """Fill the exchange from a decoded Messages response (Bedrock's InvokeModel carries one)."""
        self._response(exchange, data)

    def request_history(self, exchange: Exchange, doc: Any) -> RequestHistory | None:
        return AnthropicHistory(doc) if isinstance(doc, dict) else None

    def _response(self, exchange: Exchange, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if data.get("type") == "error" or "error" in data:
            _set_error(exchange, data.get("error"))
            return
        if isinstance(data.get("id"), str):
            exchange.response_id = data["id"]
        if isinstance(data.get("model"), str):
            exchange.response_model = data["model"]
        if isinstance(data.get("stop_reason"), str):
            exchange.finish_reasons.append(data["stop_reason"])
        if isinstance(data.get("usage"), dict):
            _set_usage(exchange, data["usage"])
        texts: list[str] = []
        for block in as_list(data.get("content")):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif block.get("type") == "tool_use":
                exchange.tool_calls.append(
                    ToolCall(
                        name=str(block.get("name") or ""),
                        arguments=dumps(block.get("input", {})),
                        id=block.get("id") if isinstance(block.get("id"), str) else None,
                        index=len(exchange.tool_calls),
                        from_object=isinstance(block.get("input", {}), dict),
                    )
                )
        if texts:
            exchange.output_text = cap_text("".join(texts), exchange.capture_max_bytes)

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return AnthropicStreamParser(exchange)

    def is_terminal(self, event: StreamEvent) -> bool:
        if event.event is not None:
            return event.event == "message_stop"
        return event.data.startswith('{"type":"message_stop"')

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        return anthropic_faults.error_response(status, error_type, message, retry_after_s)

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        return anthropic_faults.stream_error_event(error_type, message)

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        return anthropic_faults.empty_response(exchange)

    def terminal_bytes(self, exchange: Exchange | None = None) -> bytes:
        return anthropic_faults.MESSAGE_STOP


class AnthropicStreamParser(BaseStreamParser):
    """message_start ... message_stop, with input_json_delta fragments joined per block index.

    `read` and `materialise` take one event and end the stream without the event counting and the
    capture that `feed` and `finish` do: for a format that carries Anthropic's events inside its own
    (Bedrock's InvokeModelWithResponseStream) and counts those itself."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        self._blocks: dict[int, tuple[ToolCall, list[str]]] = {}  # content block index -> tool call

    def _feed(self, event: StreamEvent) -> None:
        kind = event.event
        if kind == "ping":
            return
        ev = self._json(event.data)
        if not isinstance(ev, dict):
            return
        kind = ev.get("type") or kind  # the data's type is authoritative; `event:` may be absent
        if not isinstance(kind, str):
            return
        if kind == "content_block_delta":
            delta = ev.get("delta")
            if not isinstance(delta, dict):
                return
            dtype = delta.get("type")
            if dtype == "text_delta":
                text = delta.get("text")
                if isinstance(text, str):
                    self.text.add(text)
            elif dtype == "input_json_delta":
                entry = self._blocks.get(as_int(ev.get("index")) or 0)
                part = delta.get("partial_json")
                if entry is not None and isinstance(part, str):
                    entry[1].append(part)
        elif kind == "content_block_start":
            block = ev.get("content_block")
            if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                call = ToolCall(
                    name=str(block.get("name") or ""),
                    id=block.get("id") if isinstance(block.get("id"), str) else None,
                    index=len(self._blocks),
                )
                self.exchange.tool_calls.append(call)
                # A non-empty `input` here is complete already (no deltas will follow).
                initial = block.get("input")
                self._blocks[as_int(ev.get("index")) or 0] = (call, [dumps(initial)] if initial else [])
        elif kind == "message_delta":
            delta = ev.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self.exchange.finish_reasons.append(delta["stop_reason"])
            if isinstance(ev.get("usage"), dict):
                _set_usage(self.exchange, ev["usage"])
        elif kind == "message_start":
            msg = ev.get("message")
            if isinstance(msg, dict):
                ex = self.exchange
                if isinstance(msg.get("id"), str):
                    ex.response_id = msg["id"]
                if isinstance(msg.get("model"), str):
                    ex.response_model = msg["model"]
                if isinstance(msg.get("usage"), dict):
                    _set_usage(ex, msg["usage"])
        elif kind == "message_stop":
            self.exchange.stream_complete = True
        elif kind == "error":
            _set_error(self.exchange, ev.get("error"))

    def read(self, event: StreamEvent) -> None:
        self._feed(event)

    def materialise(self) -> None:
        self._finish()

    def _finish(self) -> None:
        for call, parts in self._blocks.values():
            call.arguments = "".join(parts)
