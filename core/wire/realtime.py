"""Realtime WebSocket sessions (OpenAI Realtime, Gemini Live): the shared model and codec.

A realtime session is one WebSocket: the upgrade request is recognised like any request (a
`RealtimeFormat` claims it), and then every message is JSON in either direction. The codec is
sans-I/O, one per session: the proxy hands it each message as it arrives (`observe`) and again once
the message has reached its peer (`deliver`), and the codec turns what was delivered into
exchanges, one per server-side generation, ready for spans, invariants and exporters. A message
that is not the JSON the format expects is recorded as a parse error and passes on; nothing here
raises on traffic.

Faults find here the provider's real bytes for what they do to a session: its error event, the
warning before it closes a session, a rate-limit update, the event that ends a generation early.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

from brownout.core.exchange import Exchange, Message, RealtimeInfo, ToolCall, ToolResult, ToolSpec, Usage
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser
from brownout.core.wire.common import MALFORMED, ProviderFormat, note_parse_error
from brownout.core.wire.jsonutil import TextBuffer, dumps, loads

__all__ = [
    "OPERATION",
    "SESSION_OPERATION",
    "CloseSpec",
    "Direction",
    "Generation",
    "RealtimeCodec",
    "RealtimeEvent",
    "RealtimeFormat",
    "WsOut",
]

log = logging.getLogger(__name__)

OPERATION = "realtime"  # a generation's Exchange.operation (gen_ai.operation.name realtime_inference)
SESSION_OPERATION = "realtime_session"  # the session's own exchange: the upgrade, open until the socket closes
_RECENT = 16  # ended generations a codec keeps, for events that arrive after their end

Direction = Literal["server", "client"]  # who sent the message


@dataclass(slots=True, frozen=True)
class WsOut:
    """A message brownout sends in a session's stream (a fault's error event, a warning, a copy)."""

    content: bytes
    is_text: bool = True


@dataclass(slots=True, frozen=True)
class CloseSpec:
    """Close the session with this code and reason (what the client's WebSocket library reports)."""

    code: int
    reason: str = ""


@dataclass(slots=True)
class Generation:
    """One server-side generation of a session: its exchange and the state its events build up."""

    exchange: Exchange
    key: str  # what its events carry: the response id (OpenAI), the turn number (Gemini)
    text: TextBuffer
    calls: dict[str, ToolCall] = field(default_factory=dict)  # by the provider's item or call id
    done: bool = False


@dataclass(slots=True)
class RealtimeEvent:
    """One WebSocket message of a realtime session, decoded."""

    direction: Direction
    type: str  # the provider's event type ("" when the message is not one the format knows)
    doc: Any  # the decoded JSON, or None
    content: bytes
    is_text: bool
    codec: RealtimeCodec
    generation: Generation | None = None  # the generation it belongs to, if any
    tools: tuple[str, ...] = ()  # names of the tools it calls
    synthetic: bool = False  # made by brownout (a fault), not by either peer

    def encode(self, doc: Any) -> WsOut:
        """`doc` in this message's framing (text or binary), as the provider's compact JSON."""
        return WsOut(dumps(doc).encode(), self.is_text)


class RealtimeCodec:
    """One session's protocol state: decodes messages, and builds exchanges from what was delivered.

    Subclasses know one provider: `_classify` names an event, `_arrived` opens generations and reads
    session-level facts, `_delivered` fills generations from what reached the peer."""

    def __init__(self, fmt: RealtimeFormat, session: Exchange, clock: Callable[[], float]) -> None:
        self.format = fmt
        self.session = session  # the session's exchange (the upgrade request)
        self.clock = clock
        self.info = session.realtime or RealtimeInfo(session_id=f"rt_{session.id}", kind="session", minted=True)
        session.realtime = self.info
        self.open: dict[str, Generation] = {}
        # Generations that ended lately, by key: a late event of one (after an early end brownout sent)
        # still belongs to it. Bounded: a session may run for hours.
        self.ended: dict[str, Generation] = {}
        self.finished: list[Exchange] = []  # generations that ended, for the proxy to complete
        self.tools: list[ToolSpec] = []  # declared for the session (copied onto each generation)
        self._messages: list[Message] = []  # client input since the last generation began
        self._results: list[ToolResult] = []
        self._requested_at: float | None = None  # the client asked for a generation at this time
        self._count = 0

    # --- the proxy's side -------------------------------------------------------------

    def observe(self, direction: Direction, content: bytes, is_text: bool, *, synthetic: bool = False) -> RealtimeEvent:
        """A message as it arrives (before any fault): decoded, named, tied to its generation. A
        `synthetic` one (brownout's own) is tied to a generation but changes no arrival state."""
        doc: Any = None
        if content[:1] in (b"{", b"["):
            try:
                doc = loads(content)
            except MALFORMED as exc:
                note_parse_error(self.session, f"{direction} message", exc)
        elif content.strip():
            self.session.note_parse_error("invalid_json", f"{direction} message: not a JSON object")
        event = RealtimeEvent(direction, "", doc, content, is_text, self, synthetic=synthetic)
        if isinstance(doc, dict):
            event.type = self._classify(doc, direction)
            self._arrived(event)
        return event

    def synthetic(self, out: WsOut, direction: Direction = "server") -> RealtimeEvent:
        """An event brownout makes (an error, a warning): decoded like any other, marked as brownout's."""
        return self.observe(direction, out.content, out.is_text, synthetic=True)

    def replaced(self, event: RealtimeEvent, out: WsOut) -> RealtimeEvent:
        """`out` sent in place of `event` (an edit, an error event, an early end): brownout's own, in the
        stream where `event` was, so it belongs to `event`'s generation unless it names another."""
        new = self.synthetic(out, event.direction)
        if new.generation is None:
            new.generation = event.generation
        return new

    def deliver(self, event: RealtimeEvent, now: float | None = None) -> None:
        """`event` reached its peer: account for it (what the client got is what the exchanges say)."""
        now = self.clock() if now is None else now
        info = self.info
        if event.direction == "client":
            info.events_client += 1
        else:
            info.events_server += 1
        if isinstance(event.doc, dict):
            self._delivered(event, now)

    def close(self, now: float | None = None) -> None:
        """The session ended: generations still open end cut (no terminal event reached the client)."""
        now = self.clock() if now is None else now
        for gen in list(self.open.values()):
            gen.exchange.stream_complete = False
            self._end(gen, now)

    def drain(self) -> list[Exchange]:
        """The generations that ended since the last call, in the order they ended."""
        done, self.finished = self.finished, []
        return done

    # --- for subclasses ------------------------------------------------------------------

    @abstractmethod
    def _classify(self, doc: dict[str, Any], direction: Direction) -> str:
        """The event type of a decoded message ("" for one the format does not know)."""

    @abstractmethod
    def _arrived(self, event: RealtimeEvent) -> None:
        """Tie the event to its generation (opening one when it starts one); read session facts."""

    @abstractmethod
    def _delivered(self, event: RealtimeEvent, now: float) -> None:
        """Account for a delivered event: input, output text, tool calls, usage, the generation's end."""

    def request_started(self, now: float) -> None:
        """The client asked for a generation now (its time to first delta counts from here)."""
        if self._requested_at is None:
            self._requested_at = now

    def add_input(self, message: Message | None = None, result: ToolResult | None = None) -> None:
        """Client input for the next generation."""
        if message is not None:
            self._messages.append(message)
        if result is not None:
            self._results.append(result)

    def begin(self, key: str, now: float) -> Generation:
        """A new generation: its exchange inherits the session's request (host, headers, trace)."""
        self._count += 1
        self.info.generations += 1
        base = self.session
        ex = Exchange(
            id=f"{base.id}.{self._count}",
            session=base.session,
            method=base.method,
            scheme=base.scheme,
            host=base.host,
            port=base.port,
            path=base.path,
            client=base.client,
            capture_max_bytes=base.capture_max_bytes,
            provider=base.provider,
            gen_ai_provider=base.gen_ai_provider,
            operation=OPERATION,
            model=base.model,
            stream=True,
            streamed=True,
            stream_complete=False,
            status=base.status,
            request_headers=base.request_headers,
            traceparent=base.traceparent,
            tracestate=base.tracestate,
            replayed=base.replayed,
            tools_declared=list(self.tools),
            messages=self._messages,
            tool_results=self._results,
            realtime=RealtimeInfo(session_id=self.info.session_id, minted=self.info.minted),
        )
        self._messages, self._results = [], []
        ex.timings.start = self._requested_at if self._requested_at is not None else now
        self._requested_at = None
        gen = Generation(ex, key, TextBuffer(base.capture_max_bytes))
        self.open[key] = gen
        return gen

    def first_output(self, gen: Generation, now: float) -> None:
        """The first delta of output reached the client: time to first chunk."""
        timings = gen.exchange.timings
        if timings.first_client_byte is None:
            timings.first_client_byte = now

    def end(self, gen: Generation, now: float, *, status: str | None, finish: str | None) -> None:
        """The provider ended the generation (its terminal event reached the client)."""
        ex = gen.exchange
        ex.stream_complete = True
        if ex.realtime is not None:
            ex.realtime.status = status
        if finish:
            ex.finish_reasons.append(finish)
        self._end(gen, now)

    def generation(self, key: str) -> Generation | None:
        """The generation with this key: open, or ended lately."""
        return self.open.get(key) or self.ended.get(key)

    def _end(self, gen: Generation, now: float) -> None:
        if gen.done:
            return
        gen.done = True
        self.open.pop(gen.key, None)
        self.ended[gen.key] = gen
        if len(self.ended) > _RECENT:
            del self.ended[next(iter(self.ended))]
        ex = gen.exchange
        if gen.text:
            ex.output_text = gen.text.value()
        ex.tool_calls = list(gen.calls.values())
        for index, call in enumerate(ex.tool_calls):
            call.index = index
        ex.timings.end = now
        ex.cap_captured()
        self.finished.append(ex)

    def note_error(self, code: str | None, message: str | None) -> None:
        """An error event reached the client: on the open generation (when one is), and counted."""
        self.info.errors += 1
        self.info.last_error = code
        if len(self.open) == 1:
            ex = next(iter(self.open.values())).exchange
            ex.error_type = code or "error"
            ex.error_message = message[:300] if message else None

    # --- the provider's bytes for faults ---------------------------------------------------

    @abstractmethod
    def error_event(self, status: int, error_type: str | None, message: str | None) -> WsOut | CloseSpec:
        """The provider's error in a session for an HTTP-like status: an error event, or a close."""

    @abstractmethod
    def close_warning(self, close_in_s: float) -> list[WsOut]:
        """What the provider sends before it ends a session (OpenAI session_expired, Gemini goAway)."""

    @abstractmethod
    def default_close(self) -> CloseSpec:
        """How the provider closes a session it ends (after its warning)."""

    def rate_limits_event(self, reset_s: float, names: tuple[str, ...]) -> WsOut | None:
        """A rate-limit update with nothing remaining; None: the provider sends none."""
        return None

    @abstractmethod
    def cut_event(self, gen: Generation, status: str) -> WsOut | CloseSpec:
        """What ends `gen` early with `status` (incomplete or failed): a terminal event, or a close."""

    @abstractmethod
    def edit_tool_arguments(self, event: RealtimeEvent, edit: Callable[[str], str]) -> WsOut | None:
        """`event` with each tool call's arguments text passed through `edit`; None: it carries none."""


class _NoStream(StreamParser):
    """Realtime sessions have no HTTP body to parse: their messages go through the codec."""

    def feed(self, event: StreamEvent) -> None:
        return None


class RealtimeFormat(ProviderFormat):
    """A realtime WebSocket API: recognised at the upgrade, then spoken through a codec per session."""

    session_events: ClassVar[frozenset[str]] = frozenset()  # event types the format knows (docs, discover)
    # What generated experiments aim event faults at: an event every generation has, and a tool call's.
    generation_event: ClassVar[str] = ""
    tool_call_event: ClassVar[str] = ""

    def recognise(self, req: RequestInfo) -> str | None:
        if req.headers.get("upgrade", "").strip().lower() != "websocket":
            return None
        return SESSION_OPERATION if self._is_endpoint(req) else None

    @abstractmethod
    def _is_endpoint(self, req: RequestInfo) -> bool:
        """The upgrade request is to this provider's realtime endpoint."""

    @abstractmethod
    def codec(self, session: Exchange, clock: Callable[[], float]) -> RealtimeCodec:
        """A fresh codec for one session (its exchange is the upgrade request's)."""

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        exchange.provider, exchange.gen_ai_provider = self.provider, self.gen_ai_provider
        self._handshake(exchange)

    def _handshake(self, exchange: Exchange) -> None:
        """Read what the upgrade request says (the model in its query, for one)."""

    def _request(self, exchange: Exchange, data: Any) -> None:
        return None

    def _response(self, exchange: Exchange, data: Any) -> None:
        return None

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        return _NoStream(exchange)


def usage_from(input_tokens: int | None, output_tokens: int | None, cached: int | None = None) -> Usage:
    """A Usage from a provider's counts (None where it gave none)."""
    return replace(Usage(), input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cached)
