"""A plugin wire format for a company's own LLM gateway, loaded by tests as `tests.proxy.acme_wire:plugin`.

POST .../v1/complete `{"model", "prompt", "stream", "tools": [{"name", "schema"}]}` answers
`{"answer": {"text", "calls": [{"id", "tool", "args": "<JSON text>"}]}}`, or streamed as NDJSON
lines: `{"text": "..."}`, `{"call": {"id", "tool", "args": "<fragment>"}}` (the id and tool only on
a call's first line), and `{"end": true}`.

- `acme` (`/acme/v1/complete`) implements the hooks that show faults where tool-call arguments
  and the assistant's text are, so `malformed_json` (target `tool_arguments`) and `inject`
  (target `completion`) act on it;
- `acme-bare` (`/acme-bare/v1/complete`) is the same format without them: those faults are skipped.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

from brownout.core.exchange import Exchange, ToolCall, ToolSpec
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import BaseStreamParser, ProviderFormat
from brownout.core.wire.edits import (
    ArgumentsEdit,
    EventArguments,
    EventText,
    TextEdit,
    edit_fragment,
    edit_text,
    member,
    members,
)
from brownout.core.wire.jsonutil import cap_text

__all__ = ["AcmeBareFormat", "AcmeFormat", "plugin"]


class AcmeBareFormat(ProviderFormat):
    """The gateway's format: recognition and parsing only."""

    provider = "acme-bare"
    calls_tools = True
    prefix: ClassVar[str] = "/acme-bare/"

    def recognise(self, req: RequestInfo) -> str | None:
        ok = req.method == "POST" and req.path.startswith(self.prefix) and req.path.endswith("/v1/complete")
        return "chat" if ok else None

    def _request(self, exchange: Exchange, data: Any) -> None:
        exchange.model = data.get("model") if isinstance(data.get("model"), str) else None
        exchange.stream = data.get("stream") is True
        for tool in members(data, "tools"):
            exchange.tools_declared.append(ToolSpec(str(tool.get("name")), tool.get("schema")))

    def _response(self, exchange: Exchange, data: Any) -> None:
        answer = member(data, "answer")
        if isinstance(answer.get("text"), str):
            exchange.output_text = cap_text(answer["text"], exchange.capture_max_bytes)
        for call in members(answer, "calls"):
            exchange.tool_calls.append(ToolCall(str(call.get("tool")), str(call.get("args")), id=call.get("id")))

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return _AcmeStream(exchange)


class _AcmeStream(BaseStreamParser):
    """Joins the text lines and each call's argument fragments."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        self.calls: dict[str, list[str]] = {}
        self.tools: dict[str, str] = {}

    def _feed(self, event: StreamEvent) -> None:
        doc = self._json(event.data)
        if not isinstance(doc, dict):
            return
        if isinstance(doc.get("text"), str):
            self.text.add(doc["text"])
        call = member(doc, "call")
        if "id" in call:
            self.tools[call["id"]] = str(call.get("tool"))
            self.calls[call["id"]] = []
        if self.calls and isinstance(call.get("args"), str):
            self.calls[list(self.calls)[-1]].append(call["args"])
        if doc.get("end") is True:
            self.exchange.stream_complete = True

    def _finish(self) -> None:
        for call_id, parts in self.calls.items():
            self.exchange.tool_calls.append(ToolCall(self.tools[call_id], "".join(parts), id=call_id))


class AcmeFormat(AcmeBareFormat):
    """The gateway's format with the places faults edit."""

    provider = "acme"
    prefix = "/acme/"

    def edit_tool_arguments(self, doc: Any, edit: ArgumentsEdit) -> int:
        return sum(edit_text(call, "args", edit) for call in members(member(doc, "answer"), "calls"))

    def tool_arguments_events(self) -> EventArguments:
        current: list[Any] = [None]  # a call's id comes on its first line only: later lines continue it

        def on_event(doc: Any, edit: ArgumentsEdit) -> int:
            call = member(doc, "call")
            if "id" in call:
                current[0] = call["id"]
            return edit_fragment(call, "args", ("acme", current[0]), edit)

        return on_event

    def edit_assistant_text(self, doc: Any, edit: TextEdit) -> bool:
        answer = doc.get("answer") if isinstance(doc, dict) else None
        if not isinstance(answer, dict):
            return False
        answer["text"] = edit(answer.get("text") or "")
        return True

    def assistant_text_events(self) -> EventText:
        def on_event(doc: Any, edit: TextEdit) -> bool:
            if isinstance(doc, dict) and isinstance(doc.get("text"), str) and doc["text"]:
                doc["text"] = edit(doc["text"])
                return True
            return False

        return on_event


plugin = SimpleNamespace(wire_formats=[AcmeFormat(), AcmeBareFormat()])
