"""OpenAI Realtime (GA): `wss://api.openai.com/v1/realtime?model=...`, JSON events both ways.

A generation runs from `response.created` to `response.done` (status completed, cancelled,
incomplete or failed); its events carry `response_id`. Tool calls are `function_call` output items
whose arguments stream as `response.function_call_arguments.delta` and arrive whole in `.done`.
Errors are `error` events (`{"type": "error", "error": {"type", "code", "message", "param",
"event_id"}}`); the 60-minute cap is an `error` with code `session_expired`, then close 1001.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar
from urllib.parse import parse_qsl

from brownout.core.exchange import Exchange, Message, ToolCall, ToolResult, ToolSpec
from brownout.core.wire import openai_faults
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.jsonutil import as_int, dumps, new_id, text_of
from brownout.core.wire.realtime import (
    CloseSpec,
    Direction,
    Generation,
    RealtimeCodec,
    RealtimeEvent,
    RealtimeFormat,
    WsOut,
    usage_from,
)

__all__ = ["OpenAIRealtimeCodec", "OpenAIRealtimeFormat"]

_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.output_audio_transcript.delta"})
_OUTPUT_DELTAS = _TEXT_DELTAS | {"response.output_audio.delta", "response.function_call_arguments.delta"}
# response.done's status -> gen_ai.response.finish_reasons (a completed answer that calls tools: tool_call)
_FINISH = {"completed": "stop", "incomplete": "length", "cancelled": "cancelled", "failed": "error"}
EXPIRED_MESSAGE = "Your session hit the maximum duration of 60 minutes."


def _event_id() -> str:
    return new_id("event_", 22)


class OpenAIRealtimeCodec(RealtimeCodec):
    """One OpenAI Realtime session."""

    def _classify(self, doc: dict[str, Any], direction: Direction) -> str:
        kind = doc.get("type")
        return kind if isinstance(kind, str) else ""

    def _arrived(self, event: RealtimeEvent) -> None:
        doc, kind = event.doc, event.type
        if event.direction == "client":
            return
        if kind == "response.created":
            resp = doc.get("response")
            rid = resp.get("id") if isinstance(resp, dict) else None
            if isinstance(rid, str) and rid not in self.open:
                self.begin(rid, self.clock())
        if kind.startswith("response."):
            rid = doc.get("response_id")
            if not isinstance(rid, str):
                resp = doc.get("response")
                rid = resp.get("id") if isinstance(resp, dict) else None
            event.generation = self.generation(rid) if isinstance(rid, str) else None
        if kind == "response.function_call_arguments.done" and isinstance(doc.get("name"), str):
            event.tools = (doc["name"],)
        elif kind == "response.function_call_arguments.done" and event.generation is not None:
            call = event.generation.calls.get(str(doc.get("item_id")))
            event.tools = (call.name,) if call is not None and call.name else ()
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = doc.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call" and isinstance(item.get("name"), str):
                event.tools = (item["name"],)

    def _delivered(self, event: RealtimeEvent, now: float) -> None:
        doc, kind = event.doc, event.type
        if event.direction == "client":
            self._client(doc, kind, now)
            return
        if kind in ("session.created", "session.updated"):
            self._session(doc.get("session"), declared=kind == "session.updated")
        elif kind == "error":
            err = doc.get("error") if isinstance(doc.get("error"), dict) else {}
            code = err.get("code") or err.get("type")
            self.note_error(
                str(code) if code else None, err.get("message") if isinstance(err.get("message"), str) else None
            )
        gen = event.generation
        if gen is None or gen.done:
            return
        if kind in _OUTPUT_DELTAS:
            self.first_output(gen, now)
        if kind in _TEXT_DELTAS and isinstance(doc.get("delta"), str):
            gen.text.add(doc["delta"])
        elif kind == "response.output_item.added":
            self._item(gen, doc.get("item"))
        elif kind == "response.function_call_arguments.delta":
            call = gen.calls.get(str(doc.get("item_id")))
            if call is not None and isinstance(doc.get("delta"), str):
                call.arguments += doc["delta"]
        elif kind == "response.function_call_arguments.done":
            call = self._item(gen, {"id": doc.get("item_id"), "call_id": doc.get("call_id"), "name": doc.get("name")})
            if call is not None and isinstance(doc.get("arguments"), str):
                call.arguments = doc["arguments"]
        elif kind == "response.done":
            self._done(gen, doc.get("response"), now)

    def _client(self, doc: dict[str, Any], kind: str, now: float) -> None:
        if kind == "response.create":
            self.request_started(now)
        elif kind == "session.update":
            self._session(doc.get("session"), declared=True)
        elif kind == "conversation.item.create":
            item = doc.get("item")
            if not isinstance(item, dict):
                return
            if item.get("type") == "function_call_output":
                output = item.get("output")
                self.add_input(result=ToolResult(str(item.get("call_id") or "") or None, str(output or "")))
            elif item.get("type") == "message":
                role = str(item.get("role") or "user")
                self.add_input(Message(role, text_of(item.get("content"))))

    def _session(self, session: Any, *, declared: bool) -> None:
        if not isinstance(session, dict):
            return
        sid = session.get("id")
        if isinstance(sid, str) and sid and self.info.minted:
            self.info.session_id, self.info.minted = sid, False
        model = session.get("model")
        if isinstance(model, str) and model and self.session.model is None:
            self.session.model = model
        tools = session.get("tools")
        if declared and isinstance(tools, list):
            self.tools = [
                ToolSpec(t["name"], t.get("parameters") if isinstance(t.get("parameters"), dict) else None)
                for t in tools
                if isinstance(t, dict) and isinstance(t.get("name"), str)
            ]

    def _item(self, gen: Generation, item: Any) -> ToolCall | None:
        if not isinstance(item, dict) or item.get("type", "function_call") != "function_call":
            return None
        key = str(item.get("id") or item.get("call_id"))
        call = gen.calls.get(key)
        if call is None:
            call = gen.calls[key] = ToolCall(name="", id=None)
        if isinstance(item.get("name"), str):
            call.name = item["name"]
        if isinstance(item.get("call_id"), str):
            call.id = item["call_id"]
        if isinstance(item.get("arguments"), str) and item["arguments"]:
            call.arguments = item["arguments"]
        return call

    def _done(self, gen: Generation, resp: Any, now: float) -> None:
        ex = gen.exchange
        resp = resp if isinstance(resp, dict) else {}
        ex.response_id = resp.get("id") if isinstance(resp.get("id"), str) else gen.key
        status = resp.get("status") if isinstance(resp.get("status"), str) else None
        details = resp.get("status_details") if isinstance(resp.get("status_details"), dict) else {}
        for item in resp.get("output") or ():
            if isinstance(item, dict) and item.get("type") == "function_call":
                self._item(gen, item)
        usage = resp.get("usage")
        if isinstance(usage, dict):
            cached = usage.get("input_token_details")
            ex.usage = usage_from(
                as_int(usage.get("input_tokens")),
                as_int(usage.get("output_tokens")),
                as_int(cached.get("cached_tokens")) if isinstance(cached, dict) else None,
            )
        finish = _FINISH.get(status or "", status)
        if status == "completed" and gen.calls:
            finish = "tool_call"
        elif status in ("incomplete", "cancelled") and isinstance(details.get("reason"), str):
            finish = details["reason"]
        if status == "failed":
            err: dict[str, Any] = details["error"] if isinstance(details.get("error"), dict) else {}
            message = err.get("message")
            ex.error_type = str(err.get("code") or err.get("type") or "failed")
            ex.error_message = message[:300] if isinstance(message, str) else None
        self.end(gen, now, status=status, finish=finish)

    # --- OpenAI's bytes for faults ---------------------------------------------------------

    def _error(self, error_type: str, code: str | None, message: str) -> WsOut:
        err = {"type": error_type, "code": code, "message": message, "param": None, "event_id": None}
        return WsOut(dumps({"type": "error", "event_id": _event_id(), "error": err}).encode())

    def error_event(self, status: int, error_type: str | None, message: str | None) -> WsOut | CloseSpec:
        body = openai_faults.error_body(status, error_type, message, 1.0, new_id("req_", 32), self.session)["error"]
        etype = body["type"] if body["type"] in ("invalid_request_error", "server_error") else (
            "server_error" if status >= 500 else "invalid_request_error"
        )  # fmt: skip
        code = body["code"] if isinstance(body["code"], str) else error_type
        return self._error(etype, code, str(body["message"]))

    def close_warning(self, close_in_s: float) -> list[WsOut]:
        return [self._error("invalid_request_error", "session_expired", EXPIRED_MESSAGE)]

    def default_close(self) -> CloseSpec:
        return CloseSpec(1001, "")

    def rate_limits_event(self, reset_s: float, names: tuple[str, ...]) -> WsOut | None:
        limits = {"requests": 5000, "tokens": 40000}
        out = [
            {"name": name, "limit": limits.get(name, 1000), "remaining": 0, "reset_seconds": round(reset_s, 3)}
            for name in names
        ]
        return WsOut(dumps({"type": "rate_limits.updated", "event_id": _event_id(), "rate_limits": out}).encode())

    def cut_event(self, gen: Generation, status: str) -> WsOut | CloseSpec:
        if status == "failed":
            details: dict[str, Any] = {
                "type": "failed",
                "error": {"type": "server_error", "code": "server_error", "message": "The response failed."},
            }
        else:
            details = {"type": "incomplete", "reason": "max_output_tokens"}
        response = {
            "object": "realtime.response",
            "id": gen.key,
            "status": status,
            "status_details": details,
            "output": [],
            "conversation_id": None,
            "output_modalities": ["text"],
            "max_output_tokens": "inf",
            "audio": None,
            "usage": None,
            "metadata": None,
        }
        return WsOut(dumps({"type": "response.done", "event_id": _event_id(), "response": response}).encode())

    def edit_tool_arguments(self, event: RealtimeEvent, edit: Callable[[str], str]) -> WsOut | None:
        doc = event.doc
        if not isinstance(doc, dict):
            return None
        doc = dict(doc)
        if event.type in ("response.function_call_arguments.done", "response.function_call_arguments.delta"):
            key = "arguments" if event.type.endswith(".done") else "delta"
            if not isinstance(doc.get(key), str):
                return None
            doc[key] = edit(doc[key])
            return event.encode(doc)
        if event.type in ("response.output_item.done", "response.output_item.added"):
            item = _edited_call(doc.get("item"), edit)
            if item is None:
                return None
            doc["item"] = item
            return event.encode(doc)
        if event.type == "response.done" and isinstance(doc.get("response"), dict):
            output = doc["response"].get("output")
            items = [_edited_call(i, edit) or i for i in output] if isinstance(output, list) else []
            if items == output:
                return None
            doc["response"] = {**doc["response"], "output": items}
            return event.encode(doc)
        return None


def _edited_call(item: Any, edit: Callable[[str], str]) -> dict[str, Any] | None:
    """A function_call item with its arguments edited; None when `item` is none with arguments."""
    if not isinstance(item, dict) or item.get("type") != "function_call" or not item.get("arguments"):
        return None
    return {**item, "arguments": edit(str(item["arguments"]))}


class OpenAIRealtimeFormat(RealtimeFormat):
    """OpenAI's Realtime API over WebSocket (GA event shapes)."""

    provider = "openai_realtime"
    gen_ai_provider = "openai"
    generation_event: ClassVar[str] = "response.created"
    tool_call_event: ClassVar[str] = "response.function_call_arguments.done"
    session_events: ClassVar[frozenset[str]] = frozenset(
        {
            "session.update", "input_audio_buffer.append", "input_audio_buffer.commit", "input_audio_buffer.clear",
            "conversation.item.create", "conversation.item.delete", "conversation.item.retrieve",
            "conversation.item.truncate", "response.create", "response.cancel", "output_audio_buffer.clear",
            "session.created", "session.updated", "conversation.item.added", "conversation.item.done",
            "input_audio_buffer.committed", "input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
            "response.created", "response.output_item.added", "response.output_item.done",
            "response.content_part.added", "response.content_part.done", "response.output_text.delta",
            "response.output_text.done", "response.output_audio.delta", "response.output_audio.done",
            "response.output_audio_transcript.delta", "response.output_audio_transcript.done",
            "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.done",
            "rate_limits.updated", "error",
        }
    )  # fmt: skip

    def _is_endpoint(self, req: RequestInfo) -> bool:
        # /v1/realtime on api.openai.com; Azure and gateways mount it under a prefix.
        return req.path.rstrip("/").endswith("/realtime")

    def _handshake(self, exchange: Exchange) -> None:
        query = exchange.path.partition("?")[2]
        for key, value in parse_qsl(query):
            if key == "model" and value:
                exchange.model = value

    def codec(self, session: Exchange, clock: Callable[[], float] = time.time) -> OpenAIRealtimeCodec:
        return OpenAIRealtimeCodec(self, session, clock)

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        # A refused upgrade is answered like any REST call of the API.
        return openai_faults.error_response(status, error_type, message, retry_after_s, exchange)
