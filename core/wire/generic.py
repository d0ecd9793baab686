"""The fallback for every other request: plain JSON tool APIs ("execute_tool") and plain HTTP."""

from __future__ import annotations

import logging
import re
from typing import ClassVar

from brownout.core.exchange import Exchange, ToolCall
from brownout.core.secrets import MARK
from brownout.core.wire import shape_edits
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import BaseStreamParser, ProviderFormat, note_parse_error
from brownout.core.wire.edits import EditPlaces
from brownout.core.wire.jsonutil import decode_capped

__all__ = ["GenericFormat", "GenericStreamParser", "tool_name_from_path"]

log = logging.getLogger(__name__)

_ID_DIGITS = 3
_CONSTANT_ID = re.compile(r"[A-Z0-9_\-]*[0-9][A-Z0-9_\-]*")  # T0123ABCD, B07XYZ: ids in constant case
_HEX_ID = re.compile(r"[0-9a-fA-F]{8,}")
_TEXTUAL = ("text/", "application/json", "application/xml", "application/javascript", "application/x-ndjson")


def _looks_json(body: bytes) -> bool:
    head = body[:64].lstrip()  # slice first: lstrip on a large body would copy it all
    return head[:1] in (b"{", b"[")


def _textual(content_type: str) -> bool:
    ct = content_type.lower()
    return not ct or ct.startswith(_TEXTUAL) or "+json" in ct


def tool_name_from_path(path: str) -> str | None:
    """The last path segment that reads as a name, without its extension: /tools/weather.json -> "weather",
    /users/12345 -> "users", /services/T0123ABCD/B0456EFGH/REDACTED -> "services". Ids and secrets are
    skipped: the name labels metrics and spans, and one series per id (or a secret in a label) must never be."""
    for seg in reversed(path.split("?", 1)[0].split("/")):
        name = seg.rsplit(".", 1)[0] or seg
        if name and _is_name(name):
            return name
    return None


def _is_name(segment: str) -> bool:
    if MARK in segment or sum(c.isdigit() for c in segment) >= _ID_DIGITS:
        return False  # redacted, or a number, date, UUID, hash or version string
    return not (_CONSTANT_ID.fullmatch(segment) or _HEX_ID.fullmatch(segment))


class GenericFormat(ProviderFormat):
    """Any HTTP exchange; JSON ones are treated as tool executions."""

    provider = "http"
    edit_places: ClassVar[EditPlaces | None] = (
        shape_edits  # by shape: OpenAI-compatible servers on their own paths, relabelled gateways
    )

    def recognise(self, req: RequestInfo) -> str:
        if "json" in req.headers.get("content-type", "") or _looks_json(req.body):
            return "execute_tool"
        return "http"

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        try:
            exchange.provider, exchange.gen_ai_provider = self.provider, None
            exchange.request_body = decode_capped(body, exchange.capture_max_bytes)
            # The tool is named by the path whatever the body: `match: {tool: weather}` must act
            # on GET /tools/weather at request time, before its response says it was JSON.
            exchange.tool_name = exchange.tool_name or tool_name_from_path(exchange.path)
            if exchange.operation == "execute_tool" or (exchange.operation == "http" and _looks_json(body)):
                self._as_tool(exchange)
                if _looks_json(body):
                    # The JSON body is the tool's arguments: record it so loop and schema checks see it.
                    capped = len(body) > exchange.capture_max_bytes
                    exchange.tool_calls.append(ToolCall(exchange.tool_name or "", exchange.request_body, capped=capped))
        except Exception as exc:  # noqa: BLE001 - hostile bytes or a parser bug: recorded as the exchange's parse_error
            note_parse_error(exchange, "request", exc)

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        try:
            ct = exchange.content_type
            if exchange.operation == "http" and ("json" in ct.lower() or (not ct and _looks_json(body))):
                self._as_tool(exchange)
            if body and _textual(ct):
                exchange.output_text = decode_capped(body, exchange.capture_max_bytes)
        except Exception as exc:  # noqa: BLE001 - hostile bytes or a parser bug: recorded as the exchange's parse_error
            note_parse_error(exchange, "response", exc)

    def _as_tool(self, exchange: Exchange) -> None:
        exchange.operation = "execute_tool"
        if exchange.tool_name is None:
            exchange.tool_name = tool_name_from_path(exchange.path) or exchange.host or None

    def _request(self, exchange: Exchange, data: object) -> None:  # pragma: no cover - parse_request overridden
        pass

    def _response(self, exchange: Exchange, data: object) -> None:  # pragma: no cover - parse_response overridden
        pass

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return GenericStreamParser(exchange)

    # -- places faults edit, found by shape (see brownout.core.wire.shape_edits) -------


class GenericStreamParser(BaseStreamParser):
    """Keeps each event's data as text, so invariants can scan streamed tool output."""

    def _feed(self, event: StreamEvent) -> None:
        if event.data:
            self.text.add(event.data)
            self.text.add("\n")
