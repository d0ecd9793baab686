"""Google Gemini (generativelanguage and Vertex AI): generateContent and streamGenerateContent."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, ClassVar

from brownout.core.exchange import Exchange, Message, ToolCall, ToolResult, ToolSpec
from brownout.core.wire import gemini_edits
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import MALFORMED, BaseStreamParser, MalformedBody, ProviderFormat, note_parse_error
from brownout.core.wire.edits import EditPlaces
from brownout.core.wire.gemini_history import GeminiHistory
from brownout.core.wire.history import RequestHistory
from brownout.core.wire.jsonutil import TextBuffer, as_int, as_list, dumps, new_id

__all__ = ["GeminiFormat", "GeminiStreamParser"]

log = logging.getLogger(__name__)

_DECODER = json.JSONDecoder()
_JSON = {"content-type": "application/json; charset=UTF-8"}
# HTTP status -> (google.rpc status, message) as the API sends them
_STATUS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: ("UNAUTHENTICATED", "Request had invalid authentication credentials."),
    403: ("PERMISSION_DENIED", "The caller does not have permission"),
    404: ("NOT_FOUND", "Requested entity was not found."),
    429: ("RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    500: (
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
    504: ("DEADLINE_EXCEEDED", "Deadline expired before operation could complete."),
}


def _split_path(path: str) -> tuple[str | None, str]:
    """(model, method) from `.../models/{model}:{method}`."""
    last = path.rsplit("/", 1)[-1].replace("%3A", ":").replace("%3a", ":")
    model, _, method = last.partition(":")
    return model or None, method


def _chunk(exchange: Exchange, data: Any, text: TextBuffer) -> None:
    """One GenerateContentResponse (a whole body, or one streamed chunk)."""
    if not isinstance(data, dict):
        return
    err = data.get("error")
    if isinstance(err, dict):
        exchange.error_type = str(err.get("status") or err.get("code") or "error")
        exchange.error_message = err.get("message") if isinstance(err.get("message"), str) else None
        return
    if exchange.response_id is None and isinstance(data.get("responseId"), str):
        exchange.response_id = data["responseId"]
    if exchange.response_model is None and isinstance(data.get("modelVersion"), str):
        exchange.response_model = data["modelVersion"]
    usage = data.get("usageMetadata")
    if isinstance(usage, dict):  # cumulative in streams: the last one wins
        inp, out = as_int(usage.get("promptTokenCount")), as_int(usage.get("candidatesTokenCount"))
        if inp is not None:
            exchange.usage.input_tokens = inp
        if out is not None:
            exchange.usage.output_tokens = out
        cached = as_int(usage.get("cachedContentTokenCount"))  # part of promptTokenCount
        if cached is not None:
            exchange.usage.cache_read_tokens = cached
    for cand in as_list(data.get("candidates")):
        if not isinstance(cand, dict):
            continue
        content = cand.get("content")
        for part in as_list(content.get("parts")) if isinstance(content, dict) else ():
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str) and not part.get("thought"):
                text.add(part["text"])
            fc = part.get("functionCall")
            if isinstance(fc, dict):
                exchange.tool_calls.append(
                    ToolCall(
                        name=str(fc.get("name") or ""),
                        arguments=dumps(fc.get("args", {})),
                        id=fc.get("id") if isinstance(fc.get("id"), str) else None,
                        index=len(exchange.tool_calls),
                        from_object=isinstance(fc.get("args", {}), dict),
                    )
                )
        if isinstance(cand.get("finishReason"), str):
            exchange.finish_reasons.append(cand["finishReason"])
            if exchange.stream_complete is not None:  # None marks a non-stream: leave it so
                exchange.stream_complete = True


class GeminiFormat(ProviderFormat):
    """Gemini's REST wire format: contents/parts, functionCall, usageMetadata."""

    provider = "gemini"
    gen_ai_provider = "gcp.gemini"
    edit_places: ClassVar[EditPlaces | None] = gemini_edits
    calls_tools = True
    replay_fields = frozenset(
        ["contents", "tools", "toolConfig", "tool_config", "systemInstruction", "system_instruction"]
    )

    def recognise(self, req: RequestInfo) -> str | None:
        if req.method != "POST" or ":" not in req.path:
            return None
        _, method = _split_path(req.path)
        if method in ("generateContent", "streamGenerateContent"):
            return "generate_content"
        if method in ("embedContent", "batchEmbedContents"):
            return "embeddings"
        return None

    def _request(self, exchange: Exchange, data: Any) -> None:
        path = exchange.path.split("?", 1)[0]
        model, method = _split_path(path)
        exchange.model = model
        exchange.stream = method == "streamGenerateContent"
        if not isinstance(data, dict):
            return
        for tool in as_list(data.get("tools")):
            for decl in as_list(tool.get("functionDeclarations")) if isinstance(tool, dict) else ():
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    schema = decl.get("parameters") or decl.get("parametersJsonSchema")
                    exchange.tools_declared.append(ToolSpec(decl["name"], schema if isinstance(schema, dict) else None))
        system = data.get("systemInstruction")
        if isinstance(system, dict):
            exchange.messages.append(Message("system", _parts_text(system.get("parts"))))
        for content in as_list(data.get("contents")):
            if not isinstance(content, dict):
                continue
            parts = as_list(content.get("parts"))
            exchange.messages.append(Message(str(content.get("role") or "user"), _parts_text(parts)))
            for part in parts:
                fr = part.get("functionResponse") if isinstance(part, dict) else None
                if isinstance(fr, dict):
                    call_id = fr.get("id") if isinstance(fr.get("id"), str) else None
                    name = fr.get("name") if isinstance(fr.get("name"), str) else None
                    exchange.tool_results.append(ToolResult(call_id, dumps(fr.get("response")), name))

    def request_history(self, exchange: Exchange, doc: Any) -> RequestHistory | None:
        return GeminiHistory(doc) if isinstance(doc, dict) and exchange.operation == "generate_content" else None

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        if not body[:64].lstrip().startswith(b"["):
            super().parse_response(exchange, body)
            return
        # A stream without alt=sse is one JSON array of chunks: read chunk by chunk, so a
        # truncated stream still yields what arrived and reads as incomplete.
        text = TextBuffer(exchange.capture_max_bytes)
        exchange.stream_complete = False
        try:
            for chunk in _iter_array(body.decode("utf-8", "replace")):
                _chunk(exchange, chunk, text)
        except MALFORMED as exc:
            note_parse_error(exchange, "response", exc)
        if text:
            exchange.output_text = text.value()

    def _response(self, exchange: Exchange, data: Any) -> None:
        text = TextBuffer(exchange.capture_max_bytes)
        _chunk(exchange, data, text)
        if text:
            exchange.output_text = text.value()

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return GeminiStreamParser(exchange)

    def is_terminal(self, event: StreamEvent) -> bool:
        return '"finishReason"' in event.data

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        return status, dict(_JSON), dumps(_error_body(status, error_type, message, retry_after_s)).encode()

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        body = dumps(_error_body(503 if error_type is None else 500, error_type, message, None)).encode()
        if exchange is not None and not _is_sse(exchange):
            return b",\r\n" + body + b"]"  # closes the JSON-array stream
        return b"data: " + body + b"\r\n\r\n"

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        body = dumps(
            {
                "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 0, "candidatesTokenCount": 0, "totalTokenCount": 0},
                "modelVersion": exchange.model or "gemini-2.5-flash",
                "responseId": new_id("", 22),
            }
        ).encode()
        if not exchange.stream:
            return dict(_JSON), body
        if _is_sse(exchange):
            return {"content-type": "text/event-stream"}, b"data: " + body + b"\r\n\r\n"
        return dict(_JSON), b"[" + body + b"]"

    def terminal_bytes(self, exchange: Exchange | None = None) -> bytes:
        # Gemini has no terminal event: a final chunk carrying finishReason ends the stream.
        body = b'{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}]}'
        if exchange is not None and not _is_sse(exchange):
            return b",\r\n" + body + b"]"
        return b"data: " + body + b"\r\n\r\n"


def _iter_array(text: str) -> Iterator[Any]:
    """The elements of a JSON array, one at a time; MALFORMED where it stops being valid."""
    i = text.index("[") + 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            raise MalformedBody("truncated JSON array")
        if text[i] == "]":
            return
        obj, i = _DECODER.raw_decode(text, i)
        yield obj


def _is_sse(exchange: Exchange) -> bool:
    return "alt=sse" in exchange.path or exchange.content_type.startswith("text/event-stream")


def _parts_text(parts: Any) -> str:
    return "".join(p["text"] for p in as_list(parts) if isinstance(p, dict) and isinstance(p.get("text"), str))


def _error_body(
    status: int, error_type: str | None, message: str | None, retry_after_s: float | None
) -> dict[str, Any]:
    rpc, default = _STATUS.get(status, ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION", "Request failed."))
    err: dict[str, Any] = {"code": status, "message": message or default, "status": error_type or rpc}
    if retry_after_s is not None:
        # Gemini has no retry-after header; the delay travels as a google.rpc.RetryInfo detail.
        delay = f"{max(0, round(retry_after_s))}s"
        err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]
    return {"error": err}


class GeminiStreamParser(BaseStreamParser):
    """`?alt=sse` chunks: each a full GenerateContentResponse; no [DONE]."""

    def _feed(self, event: StreamEvent) -> None:
        chunk = self._json(event.data)
        if chunk is not None:
            _chunk(self.exchange, chunk, self.text)
