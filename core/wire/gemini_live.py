"""Gemini Live (`BidiGenerateContent`): JSON messages both ways over one WebSocket.

The client opens with `setup` (model, tools, `sessionResumption.handle` to resume), then sends
`clientContent`, `realtimeInput` and `toolResponse`. The server answers `setupComplete`, then
`serverContent` (`modelTurn` parts, `turnComplete`, `interrupted`), `toolCall`, `usageMetadata`,
`sessionResumptionUpdate` and `goAway{timeLeft}`, usually as binary frames. A generation runs from
the first model output after client input to `turnComplete` (or `interrupted`, or a `toolCall`,
which ends it waiting for the tool's answer). Errors are close frames: 1011 after `goAway`, 1008
for a rejected resumption, 1007 for an invalid argument. The Developer API exposes no session id,
so brownout mints one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from brownout.core.exchange import Exchange, Message, ToolCall, ToolResult, ToolSpec
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.gemini import GeminiFormat
from brownout.core.wire.jsonutil import as_int, as_list, dumps, text_of
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

__all__ = ["GeminiLiveCodec", "GeminiLiveFormat"]

_SERVER_KINDS = (
    "setupComplete", "serverContent", "toolCall", "toolCallCancellation", "goAway",
    "sessionResumptionUpdate", "usageMetadata",
)  # fmt: skip
_CLIENT_KINDS = ("setup", "clientContent", "realtimeInput", "toolResponse")
# HTTP-like status -> the close Gemini Live sends for it
_CLOSES: dict[int, CloseSpec] = {
    400: CloseSpec(1007, "Request contains an invalid argument."),
    401: CloseSpec(1008, "API key not valid. Please pass a valid API key."),
    403: CloseSpec(1008, "The caller does not have permission."),
    429: CloseSpec(1011, "Resource has been exhausted (e.g. check quota)."),
    500: CloseSpec(1011, "Internal error encountered."),
    503: CloseSpec(1011, "The service is currently unavailable."),
}


class GeminiLiveCodec(RealtimeCodec):
    """One Gemini Live session."""

    def __init__(self, fmt: RealtimeFormat, session: Exchange, clock: Callable[[], float]) -> None:
        super().__init__(fmt, session, clock)
        self._turns = 0
        self._turn_open = False  # the server's current turn has begun and not yet ended (as messages arrive)
        self.binary = True  # how the server frames its messages (brownout's own follow suit)

    def _classify(self, doc: dict[str, Any], direction: Direction) -> str:
        for kind in _SERVER_KINDS if direction == "server" else _CLIENT_KINDS:
            if kind in doc or _snake(kind) in doc:
                return kind
        return ""

    def _arrived(self, event: RealtimeEvent) -> None:
        doc, kind = event.doc, event.type
        if event.direction == "client":
            return
        if event.synthetic:  # brownout's own: part of the turn in progress, which it does not end
            event.generation = self.generation(str(self._turns)) if kind == "serverContent" else None
            return
        self.binary = not event.is_text
        if not self._turn_open and (_model_output(doc) or kind == "toolCall"):
            self._turns += 1
            self._turn_open = True
            self.begin(str(self._turns), self.clock())
        if self._turn_open and kind in ("serverContent", "toolCall", "usageMetadata", "toolCallCancellation"):
            # A turn's events belong to it even after brownout ended it early for the client.
            event.generation = self.generation(str(self._turns))
        content = doc.get("serverContent")
        if kind == "toolCall" or (
            isinstance(content, dict) and (content.get("turnComplete") or content.get("interrupted"))
        ):
            self._turn_open = False
        if kind == "toolCall":
            calls = doc["toolCall"].get("functionCalls") if isinstance(doc["toolCall"], dict) else None
            event.tools = tuple(
                c["name"] for c in as_list(calls) if isinstance(c, dict) and isinstance(c.get("name"), str)
            )

    def _delivered(self, event: RealtimeEvent, now: float) -> None:
        doc, kind = event.doc, event.type
        if event.direction == "client":
            self._client(doc, kind, now)
            return
        if kind == "sessionResumptionUpdate":
            update = doc["sessionResumptionUpdate"]
            if isinstance(update, dict) and update.get("resumable") and update.get("newHandle"):
                self.info.resumption_offered = True
        gen = event.generation
        if gen is None or gen.done:
            return
        usage = doc.get("usageMetadata")
        if isinstance(usage, dict):
            gen.exchange.usage = usage_from(
                as_int(usage.get("promptTokenCount")),
                as_int(usage.get("responseTokenCount") or usage.get("candidatesTokenCount")),
                as_int(usage.get("cachedContentTokenCount")),
            )
        if kind == "toolCall":
            self.first_output(gen, now)
            for call in as_list(doc["toolCall"].get("functionCalls") if isinstance(doc["toolCall"], dict) else None):
                if isinstance(call, dict) and isinstance(call.get("name"), str):
                    key = str(call.get("id") or len(gen.calls))
                    args = call.get("args")
                    text = dumps(args) if isinstance(args, dict) else str(args if args is not None else "")
                    gen.calls[key] = ToolCall(call["name"], text, id=call.get("id"), from_object=isinstance(args, dict))
            self.end(gen, now, status="completed", finish="tool_call")
            return
        content = doc.get("serverContent")
        if not isinstance(content, dict):
            return
        if _model_output(doc):
            self.first_output(gen, now)
        turn = content.get("modelTurn")
        for part in as_list(turn.get("parts") if isinstance(turn, dict) else None):
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                gen.text.add(part["text"])
        transcript = content.get("outputTranscription")
        if not gen.text and isinstance(transcript, dict) and isinstance(transcript.get("text"), str):
            gen.text.add(transcript["text"])
        if content.get("interrupted"):
            self.end(gen, now, status="cancelled", finish="interrupted")
        elif content.get("turnComplete"):
            self.end(gen, now, status="completed", finish="stop")

    def _client(self, doc: dict[str, Any], kind: str, now: float) -> None:
        body = field(doc, kind)
        if not isinstance(body, dict):
            return
        if kind == "setup":
            self._setup(body)
        elif kind == "clientContent":
            for turn in as_list(body.get("turns")):
                if isinstance(turn, dict):
                    self.add_input(Message(str(turn.get("role") or "user"), text_of(turn.get("parts"))))
            if field(body, "turnComplete"):
                self.request_started(now)
        elif kind == "realtimeInput" and isinstance(body.get("text"), str):
            self.add_input(Message("user", body["text"]))
            self.request_started(now)
        elif kind == "toolResponse":
            for resp in as_list(field(body, "functionResponses")):
                if isinstance(resp, dict):
                    text = dumps(resp.get("response")) if resp.get("response") is not None else ""
                    self.add_input(result=ToolResult(resp.get("id"), text, name=resp.get("name")))
            self.request_started(now)

    def _setup(self, setup: dict[str, Any]) -> None:
        model = setup.get("model")
        if isinstance(model, str) and model:
            self.session.model = model.removeprefix("models/")
        resumption = field(setup, "sessionResumption")
        if isinstance(resumption, dict) and resumption.get("handle"):
            self.info.resumption_used = True
        tools: list[ToolSpec] = []
        for tool in as_list(setup.get("tools")):
            for decl in as_list(field(tool, "functionDeclarations") if isinstance(tool, dict) else None):
                if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                    schema = field(decl, "parametersJsonSchema") or decl.get("parameters")
                    tools.append(ToolSpec(decl["name"], schema if isinstance(schema, dict) else None))
        self.tools = tools

    # --- Gemini's bytes for faults ------------------------------------------------------------

    def _out(self, doc: Any) -> WsOut:
        return WsOut(dumps(doc).encode(), not self.binary)

    def error_event(self, status: int, error_type: str | None, message: str | None) -> WsOut | CloseSpec:
        spec = _CLOSES.get(status) or CloseSpec(1011 if status >= 500 else 1007, "Internal error encountered.")
        return CloseSpec(spec.code, message or spec.reason)

    def close_warning(self, close_in_s: float) -> list[WsOut]:
        left = f"{max(0.0, close_in_s):.3f}".rstrip("0").rstrip(".") + "s"
        return [self._out({"goAway": {"timeLeft": left}})]

    def default_close(self) -> CloseSpec:
        return CloseSpec(1011, "The session has ended.")

    def cut_event(self, gen: Generation, status: str) -> WsOut | CloseSpec:
        if status == "failed":
            return CloseSpec(1011, "Internal error encountered.")
        return self._out({"serverContent": {"interrupted": True, "turnComplete": True}})

    def edit_tool_arguments(self, event: RealtimeEvent, edit: Callable[[str], str]) -> WsOut | None:
        if event.type != "toolCall" or not isinstance(event.doc, dict):
            return None
        body = field(event.doc, "toolCall")
        calls = field(body, "functionCalls") if isinstance(body, dict) else None
        if not isinstance(calls, list) or not any(isinstance(c, dict) and "args" in c for c in calls):
            return None
        # `args` is an object on the wire: broken, it becomes a string holding the broken text (what the
        # HTTP format does too), which no client can take for the arguments object it expects.
        edited = [
            {**c, "args": edit(c["args"] if isinstance(c["args"], str) else dumps(c["args"]))}
            if isinstance(c, dict) and "args" in c
            else c
            for c in calls
        ]
        return event.encode({"toolCall": {**body, "functionCalls": edited}})


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)


def field(doc: dict[str, Any], name: str) -> Any:
    """`doc[name]`, or its snake_case spelling: the API reads protobuf JSON, which accepts both
    (google-genai sends `client_content`, `tool_response`)."""
    value = doc.get(name)
    return value if value is not None else doc.get(_snake(name))


def _model_output(doc: dict[str, Any]) -> bool:
    content = doc.get("serverContent")
    if not isinstance(content, dict):
        return False
    turn = content.get("modelTurn")
    return bool(isinstance(turn, dict) and turn.get("parts")) or "outputTranscription" in content


class GeminiLiveFormat(RealtimeFormat):
    """Gemini Live API (BidiGenerateContent) over WebSocket."""

    provider = "gemini_live"
    gen_ai_provider = "gcp.gemini"
    generation_event: ClassVar[str] = "serverContent"
    tool_call_event: ClassVar[str] = "toolCall"
    session_events: ClassVar[frozenset[str]] = frozenset(_SERVER_KINDS + _CLIENT_KINDS)

    def _is_endpoint(self, req: RequestInfo) -> bool:
        return req.path.endswith((".BidiGenerateContent", ".BidiGenerateContentConstrained", "/BidiGenerateContent"))

    def codec(self, session: Exchange, clock: Callable[[], float] = time.time) -> GeminiLiveCodec:
        return GeminiLiveCodec(self, session, clock)

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        return _GEMINI.error_response(status, error_type, message, retry_after_s, exchange)


_GEMINI = GeminiFormat()
