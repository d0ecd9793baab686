"""Ollama's native API: /api/chat, /api/generate, /api/embed, with NDJSON streams."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, ClassVar

from brownout.core.exchange import Exchange, Message, ToolCall, ToolResult, ToolSpec
from brownout.core.wire import ollama_edits
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import BaseStreamParser, ProviderFormat
from brownout.core.wire.edits import EditPlaces
from brownout.core.wire.history import RequestHistory
from brownout.core.wire.jsonutil import TextBuffer, as_int, as_list, dumps
from brownout.core.wire.openai_history import ChatHistory

__all__ = ["OllamaFormat", "OllamaStreamParser"]

log = logging.getLogger(__name__)

_JSON = {"content-type": "application/json; charset=utf-8"}
_NDJSON = {"content-type": "application/x-ndjson"}
_OPERATIONS = {"/api/chat": "chat", "/api/generate": "text_completion", "/api/embed": "embeddings",
               "/api/embeddings": "embeddings"}  # fmt: skip
_MESSAGES = {
    400: "invalid request",
    404: 'model "{model}" not found, try pulling it first',
    429: "server busy, please try again.  maximum pending requests exceeded",
    500: "llama runner process has terminated: exit status 2",
    503: "server overloaded, please try again later",
}


def _line(exchange: Exchange, data: Any, text: TextBuffer) -> None:
    """One response object: a whole body or one NDJSON line."""
    if not isinstance(data, dict):
        return
    if "error" in data:
        # Ollama errors carry no type: the status names it, or it came mid-stream after a 200.
        status = exchange.status
        exchange.error_type = str(status) if status is not None and status >= 400 else "stream_error"
        exchange.error_message = str(data["error"])
        return
    if exchange.response_model is None and isinstance(data.get("model"), str):
        exchange.response_model = data["model"]
    msg = data.get("message")
    if isinstance(msg, dict):
        if isinstance(msg.get("content"), str):
            text.add(msg["content"])
        for tc in as_list(msg.get("tool_calls")):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                args, index = fn.get("arguments"), as_int(fn.get("index"))
                exchange.tool_calls.append(
                    ToolCall(
                        name=str(fn.get("name") or ""),
                        arguments=args if isinstance(args, str) else dumps(args if args is not None else {}),
                        id=tc.get("id") if isinstance(tc.get("id"), str) else None,
                        index=len(exchange.tool_calls) if index is None else index,
                        from_object=args is None or isinstance(args, dict),
                    )
                )
    elif isinstance(data.get("response"), str):
        text.add(data["response"])
    if data.get("done") is True:
        if isinstance(data.get("done_reason"), str):
            exchange.finish_reasons.append(data["done_reason"])
        inp, out = as_int(data.get("prompt_eval_count")), as_int(data.get("eval_count"))
        if inp is not None:
            exchange.usage.input_tokens = inp
        if out is not None:
            exchange.usage.output_tokens = out
        if exchange.stream_complete is not None:
            exchange.stream_complete = True


class OllamaFormat(ProviderFormat):
    """Ollama's native REST API; streams unless the request says `"stream": false`."""

    provider = "ollama"
    gen_ai_provider = "ollama"
    edit_places: ClassVar[EditPlaces | None] = ollama_edits
    calls_tools = True
    replay_fields = frozenset(["model", "messages", "prompt", "system", "tools", "format", "stream", "input"])

    def recognise(self, req: RequestInfo) -> str | None:
        if req.method != "POST":
            return None
        path = req.path.rstrip("/")
        i = path.rfind("/api/")
        return _OPERATIONS.get(path[i:]) if i >= 0 else None

    def _request(self, exchange: Exchange, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if isinstance(data.get("model"), str):
            exchange.model = data["model"]
        # Ollama streams by default: only an explicit false turns it off (embeddings never stream).
        exchange.stream = data.get("stream") is not False and exchange.operation != "embeddings"
        for tool in as_list(data.get("tools")):
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                params = fn.get("parameters")
                exchange.tools_declared.append(ToolSpec(fn["name"], params if isinstance(params, dict) else None))
        if isinstance(data.get("system"), str):
            exchange.messages.append(Message("system", data["system"]))
        if isinstance(data.get("prompt"), str):
            exchange.messages.append(Message("user", data["prompt"]))
        for msg in as_list(data.get("messages")):
            if not isinstance(msg, dict):
                continue
            role, content = str(msg.get("role") or ""), msg.get("content")
            text = content if isinstance(content, str) else ""
            exchange.messages.append(Message(role, text))
            if role == "tool":
                name = msg.get("tool_name") or msg.get("name")
                call_id = msg.get("tool_call_id")
                call_id = call_id if isinstance(call_id, str) else None
                exchange.tool_results.append(ToolResult(call_id, text, name if isinstance(name, str) else None))

    def _response(self, exchange: Exchange, data: Any) -> None:
        text = TextBuffer(exchange.capture_max_bytes)
        _line(exchange, data, text)
        if text:
            exchange.output_text = text.value()

    def request_history(self, exchange: Exchange, doc: Any) -> RequestHistory | None:
        # /api/chat messages have OpenAI's chat layout; /api/generate has a prompt, no history.
        return ChatHistory(doc) if isinstance(doc, dict) and exchange.operation == "chat" else None

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        # A streamed body parsed whole (not framed by the caller) is several NDJSON lines.
        if b"}\n{" in body[:65536]:
            streamed = exchange.streamed  # buffered by the caller, so not passed through as a stream
            parser = self.stream_parser(exchange)
            exchange.streamed = streamed
            try:
                for raw in body.splitlines(keepends=True):
                    if raw.strip():
                        parser.feed(StreamEvent(raw=raw, data=raw.decode("utf-8", "replace").strip()))
            finally:
                parser.finish()
            return
        super().parse_response(exchange, body)

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return OllamaStreamParser(exchange)

    def is_terminal(self, event: StreamEvent) -> bool:
        data = event.data
        return '"done":true' in data or '"done": true' in data

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        model = (exchange.model if exchange else None) or "llama3.2"
        # Ollama's error is a bare string: an explicit error_type is that text, never a template.
        text = message or error_type or _MESSAGES.get(status, "internal error").format(model=model)
        headers = dict(_JSON)
        if retry_after_s is not None:
            headers["retry-after"] = str(max(0, math.ceil(retry_after_s)))  # never invite an early retry
        return status, headers, dumps({"error": text}).encode()

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        return dumps({"error": message or _MESSAGES[500]}).encode() + b"\n"

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        line = self._done_line(exchange)
        if exchange.operation == "embeddings":
            body = {"model": exchange.model or "llama3.2", "embeddings": [], "prompt_eval_count": 0}
            return dict(_JSON), dumps(body).encode()
        return (dict(_NDJSON), line + b"\n") if exchange.stream else (dict(_JSON), line)

    def terminal_bytes(self, exchange: Exchange | None = None) -> bytes:
        return self._done_line(exchange) + b"\n"

    @staticmethod
    def _done_line(exchange: Exchange | None) -> bytes:
        line: dict[str, Any] = {
            "model": (exchange.model if exchange else None) or "llama3.2",
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime()),
        }
        if exchange is not None and exchange.operation == "text_completion":
            line["response"] = ""
        else:
            line["message"] = {"role": "assistant", "content": ""}
        line.update({"done_reason": "stop", "done": True, "total_duration": 0, "load_duration": 0})
        line.update({"prompt_eval_count": 0, "prompt_eval_duration": 0, "eval_count": 0, "eval_duration": 0})
        return dumps(line).encode()


class OllamaStreamParser(BaseStreamParser):
    """NDJSON lines ending with a `done: true` line; `{"error": ...}` lines may arrive after a 200."""

    def _feed(self, event: StreamEvent) -> None:
        line = self._json(event.data, "stream line")
        if line is not None:
            _line(self.exchange, line, self.text)
