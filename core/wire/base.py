"""The wire-format abstraction: one implementation per provider, in one module each.

A wire format recognises its requests, parses request and response bodies (streamed ones
event by event) into the `Exchange`, and knows its provider's exact bytes for faults
(error bodies, error events, terminal events, empty completions) and where its responses
carry what faults rewrite in place (tool-call arguments, the assistant's text; see
`brownout.core.wire.edits`). Those hooks do nothing by default: a fault that needs one on a
format without it is recorded as skipped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from brownout.core.exchange import Exchange
from brownout.core.wire.edits import ArgumentsEdit, EditPlaces, EventArguments, EventText, TextEdit
from brownout.core.wire.history import RequestHistory
from brownout.core.wire.replaykey import normalised_body

__all__ = ["RequestInfo", "StreamEvent", "StreamParser", "WireFormat"]


@dataclass(slots=True, frozen=True)
class RequestInfo:
    """What recognition may look at: no mitmproxy types."""

    method: str
    host: str
    path: str  # path without the query string
    query: str
    headers: Mapping[str, str]  # case-insensitive lookups are the caller's job: keys are lower-case
    body: bytes


@dataclass(slots=True)
class StreamEvent:
    """One SSE event or NDJSON line, with the exact bytes it occupied on the wire."""

    raw: bytes  # including the trailing blank line (SSE) or newline (NDJSON)
    data: str  # SSE: the joined `data:` lines; NDJSON: the line
    event: str | None = None  # SSE `event:` field

    def json(self) -> Any:
        """The decoded data, or None when it is not JSON (e.g. `[DONE]`)."""
        import json

        try:
            return json.loads(self.data)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            return None


class StreamParser(ABC):
    """Consumes a streamed response event by event and fills the exchange."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange

    @abstractmethod
    def feed(self, event: StreamEvent) -> None:
        """Account for one event (called in wire order)."""

    def finish(self) -> None:
        """The stream ended (cleanly or not); finalise reassembled state."""


class WireFormat(ABC):
    """Provider knowledge: recognition, parsing, and the provider's real bytes."""

    provider: ClassVar[str]  # brownout's id: what `match.provider` names and exchanges record
    gen_ai_provider: ClassVar[str | None] = None  # gen_ai.provider.name on spans; None: not a GenAI provider
    calls_tools: ClassVar[bool] = False  # responses carry model tool calls (a `tool` match waits for them)
    # Its stream parser must see each event as it arrives (it stamps them with the time, or the proxy reads
    # what it parsed while the stream is open); else the proxy may parse a stream's copy after the answer.
    parses_live: ClassVar[bool] = False
    # Requests are signed over their body (AWS SigV4): a fault that rewrote one would break the signature,
    # so brownout never does (rules that would are refused at load, and skipped if they fire anyway).
    signs_requests: ClassVar[bool] = False
    # Body fields that decide the answer, for record/replay matching; None: all but the volatile ones.
    replay_fields: ClassVar[frozenset[str] | None] = None

    @abstractmethod
    def recognise(self, req: RequestInfo) -> str | None:
        """Return the operation name when this format owns the request, else None."""

    @abstractmethod
    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        """Fill model, stream flag, declared tools, tool results and messages."""

    @abstractmethod
    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        """Fill the exchange from a complete (non-streamed) response body."""

    @abstractmethod
    def stream_parser(self, exchange: Exchange) -> StreamParser:
        """A parser for a streamed response of this exchange."""

    def replay_key(self, req: RequestInfo) -> Any:
        """The normalised body replay matches this request on (method, host and path are matched apart)."""
        return normalised_body(req.body, self.replay_fields)

    def is_terminal(self, event: StreamEvent) -> bool:
        """True for the event that marks a complete stream ([DONE], message_stop, done:true)."""
        return False

    def request_history(self, exchange: Exchange, doc: Any) -> RequestHistory | None:
        """The conversation in a decoded request document, for request mutations; None: it has none."""
        return None

    # A provider's edits module (brownout.core.wire.edits.EditPlaces); None: no places to edit, so the
    # five methods below find nothing. A format may override the methods instead.
    edit_places: ClassVar[EditPlaces | None] = None

    def edit_tool_arguments(self, doc: Any, edit: ArgumentsEdit) -> int:
        """Hand each tool call's arguments in a decoded whole response to `edit`; returns how many changed."""
        return self.edit_places.tool_arguments(doc, edit) if self.edit_places is not None else 0

    def tool_arguments_events(self) -> EventArguments | None:
        """An editor of tool-call arguments for one stream's decoded events, called in wire order (it may
        keep per-stream state, e.g. which call a fragment belongs to); None: this format knows none."""
        return self.edit_places.stream_tool_arguments if self.edit_places is not None else None

    def edit_assistant_text(self, doc: Any, edit: TextEdit) -> bool:
        """Hand the assistant's text in a decoded whole response to `edit` (an answer without text gets a
        piece, edited from ""); False when the response has no place for text."""
        return self.edit_places.assistant_text(doc, edit) if self.edit_places is not None else False

    def assistant_text_events(self) -> EventText | None:
        """An editor of the assistant's text for one stream's decoded events; None: this format knows none."""
        return self.edit_places.event_text if self.edit_places is not None else None

    def drift_field(self, doc: Any) -> str | None:
        """The JSON path of the field a client of this provider cannot do without, in a decoded whole
        response or one stream event (what schema drift renames or drops); None: none known. An
        `edit_places` module without `drift_field` knows none."""
        find = getattr(self.edit_places, "drift_field", None)
        return find(doc) if find is not None else None

    def reparse_request(self, exchange: Exchange, body: bytes) -> None:
        """Read a request again after a fault rewrote it: the exchange then shows what upstream got."""
        exchange.messages.clear()
        exchange.tool_results.clear()
        exchange.tools_declared.clear()
        exchange.request_bytes = len(body)
        self.parse_request(exchange, body)
