"""OpenAI and OpenAI-compatible servers: chat completions, Responses, embeddings, completions."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from brownout.core.exchange import Exchange, Message, ToolCall
from brownout.core.wire import openai_edits, openai_faults
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.edits import EditPlaces
from brownout.core.wire.history import RequestHistory
from brownout.core.wire.jsonutil import as_int, as_list, cap_text, dumps
from brownout.core.wire.openai_history import ChatHistory, ResponsesHistory
from brownout.core.wire.openai_request import chat_request, responses_request
from brownout.core.wire.openai_stream import (
    RESPONSES_TERMINAL,
    ChatStreamParser,
    ResponsesStreamParser,
    set_error,
    set_usage,
)

__all__ = ["OpenAIFormat"]

log = logging.getLogger(__name__)


_OPERATIONS = frozenset({"chat", "responses", "embeddings", "text_completion"})


def _operation(path: str) -> str | None:
    # Suffix checks so vLLM, LiteLLM, Azure (/openai/deployments/x/...) and gateways match.
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/embeddings"):
        return "embeddings"
    if path.endswith("/completions"):
        return "text_completion"
    return None


def _azure_deployment(path: str) -> str | None:
    """Azure puts the model (deployment) in the path, not the body."""
    marker = "/deployments/"
    i = path.find(marker)
    if i < 0:
        return None
    return path[i + len(marker) :].split("/", 1)[0] or None


class OpenAIFormat(ProviderFormat):
    """OpenAI's REST wire format, also spoken by most self-hosted inference servers."""

    provider = "openai"
    gen_ai_provider = "openai"
    edit_places: ClassVar[EditPlaces | None] = openai_edits
    calls_tools = True
    replay_fields = frozenset(
        [
            "model",
            "messages",
            "input",
            "instructions",
            "prompt",
            "tools",
            "tool_choice",
            "functions",
            "function_call",
            "response_format",
            "text",
            "stream",
            "previous_response_id",
            "n",
            "modalities",
            "encoding_format",
            "dimensions",
        ]
    )

    def recognise(self, req: RequestInfo) -> str | None:
        if req.method != "POST":
            return None
        path = req.path.rstrip("/")
        return _operation(path)

    # -- requests ------------------------------------------------------------------

    def _request(self, exchange: Exchange, data: Any) -> None:
        if not isinstance(data, dict):
            return
        model = data.get("model")
        path = exchange.path.split("?", 1)[0]
        exchange.model = model if isinstance(model, str) else _azure_deployment(path)
        exchange.stream = data.get("stream") is True
        op = exchange.operation
        if op not in _OPERATIONS:  # the caller did not copy detect()'s operation: derive it
            op = exchange.operation = _operation(path.rstrip("/")) or "chat"
        if op == "responses":
            responses_request(exchange, data)
        elif op == "text_completion":
            prompt = data.get("prompt")
            if isinstance(prompt, str):
                exchange.messages.append(Message("user", prompt))
        elif op != "embeddings":
            chat_request(exchange, data)

    def request_history(self, exchange: Exchange, doc: Any) -> RequestHistory | None:
        if not isinstance(doc, dict):
            return None
        if exchange.operation == "responses":
            return ResponsesHistory(doc)
        return ChatHistory(doc) if exchange.operation == "chat" else None

    # -- responses -----------------------------------------------------------------

    def _response(self, exchange: Exchange, data: Any) -> None:
        if not isinstance(data, dict):
            return
        err = data.get("error")
        if err:
            set_error(exchange, err)
            if "choices" not in data and "output" not in data:
                return
        if isinstance(data.get("id"), str):
            exchange.response_id = data["id"]
        if isinstance(data.get("model"), str):
            exchange.response_model = data["model"]
        usage = data.get("usage")
        if isinstance(usage, dict):
            set_usage(exchange, usage)
        if data.get("object") == "response" or "output" in data:
            _responses_response(exchange, data, exchange.capture_max_bytes)
        elif isinstance(data.get("choices"), list):
            _choices_response(exchange, data["choices"], exchange.capture_max_bytes)

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        if exchange.operation == "responses":
            return ResponsesStreamParser(exchange)
        return ChatStreamParser(exchange)

    def is_terminal(self, event: StreamEvent) -> bool:
        data = event.data
        if data.startswith("[DONE]"):
            return True
        if event.event is not None:
            return event.event in RESPONSES_TERMINAL
        # Some compatible servers omit `event:` on Responses streams; sniff before parsing.
        return data.startswith('{"type":"response.') and any(f'"{t}"' in data[:40] for t in RESPONSES_TERMINAL)

    # -- fault bytes -----------------------------------------------------------------

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        return openai_faults.error_response(status, error_type, message, retry_after_s, exchange)

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        return openai_faults.stream_error_event(error_type, message, exchange)

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        return openai_faults.empty_response(exchange)

    def terminal_bytes(self, exchange: Exchange | None = None) -> bytes:
        if exchange is not None and exchange.operation == "responses":
            return openai_faults.responses_completed_event(exchange)
        return b"data: [DONE]\n\n"


def _choices_response(exchange: Exchange, choices: list[Any], cap: int) -> None:
    texts: list[str] = []
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        if isinstance(choice.get("finish_reason"), str):
            exchange.finish_reasons.append(choice["finish_reason"])
        if isinstance(choice.get("text"), str):  # legacy completions
            texts.append(choice["text"])
        msg = choice.get("message")
        if not isinstance(msg, dict):
            continue
        if isinstance(msg.get("content"), str):
            texts.append(msg["content"])
        for i, tc in enumerate(as_list(msg.get("tool_calls"))):
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                args = fn.get("arguments")
                exchange.tool_calls.append(
                    ToolCall(
                        name=str(fn.get("name") or ""),
                        arguments=args if isinstance(args, str) else dumps(args) if args is not None else "",
                        id=tc.get("id") if isinstance(tc.get("id"), str) else None,
                        index=as_int(tc.get("index")) or i,
                    )
                )
        fc = msg.get("function_call")
        if isinstance(fc, dict):
            exchange.tool_calls.append(ToolCall(str(fc.get("name") or ""), str(fc.get("arguments") or "")))
    if texts:
        exchange.output_text = cap_text("".join(texts), cap)


def _responses_response(exchange: Exchange, data: dict[str, Any], cap: int) -> None:
    status = data.get("status")
    incomplete = data.get("incomplete_details")
    if isinstance(incomplete, dict) and isinstance(incomplete.get("reason"), str):
        exchange.finish_reasons.append(incomplete["reason"])
    elif isinstance(status, str):
        exchange.finish_reasons.append(status)
    if isinstance(data.get("error"), dict):
        set_error(exchange, data["error"])
    texts: list[str] = []
    for item in as_list(data.get("output")):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else item.get("id")
            exchange.tool_calls.append(
                ToolCall(
                    name=str(item.get("name") or ""),
                    arguments=str(item.get("arguments") or ""),
                    id=call_id if isinstance(call_id, str) else None,
                    index=len(exchange.tool_calls),
                )
            )
        elif item.get("type") == "message":
            texts.append(
                "".join(
                    p.get("text", "")
                    for p in as_list(item.get("content"))
                    if isinstance(p, dict) and p.get("type") == "output_text" and isinstance(p.get("text"), str)
                )
            )
    if texts:
        exchange.output_text = cap_text("".join(texts), cap)
