"""The fault abstraction: what a fault may do at each phase of an exchange.

Faults never see mitmproxy. The proxy layer (proxy/addon.py) asks the active faults, in
order, at these points and applies what they return:

1. `before_upstream`: await delays (latency), or answer instead of upstream
   (`Respond`), or drop the connection (`Reset`), or hold it (`Hang`). When the request goes on,
   `announcement` may name a server notification for the session's open subscription streams.
   Then, when nothing answered, `edit_request` rewrites the decoded request body before it
   is forwarded (request mutations); the exchange is re-read from what was sent.
2. `on_response_headers`: await delays (time to first byte); may edit headers.
3. Body, one of:
   - streamed responses (SSE/NDJSON, or bodies over the streaming threshold):
     `stream_editor` returns a per-event editor (truncate, corrupt a frame, error event);
     `stream_timing` returns pacing that needs real awaits (stall, throttle, reset after N
     bytes), which the proxy realises through its in-process relay;
   - buffered responses: `edit_body` gets the whole decoded body.
4. The exchange's `faults` list records what fired (the engine does that). A phase that finds
   nothing it can act on (a body that is not JSON, a stream too large to buffer) raises
   `NotApplicable`: the fault then moves to the exchange's `faults_skipped` with the reason,
   and is neither counted, announced nor put on the span as injected.
"""

from __future__ import annotations

import builtins
import random
from abc import ABC
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from brownout.core.config import Model
from brownout.core.exchange import Exchange
from brownout.core.wire.base import StreamEvent, WireFormat

if TYPE_CHECKING:
    from brownout.core.wire.realtime import RealtimeEvent
    from brownout.faults.events import EventAction

__all__ = [
    "CLOSE",
    "RESET",
    "Fault",
    "FaultContext",
    "FaultParams",
    "Hang",
    "NotApplicable",
    "Reset",
    "Respond",
    "StreamEditor",
    "StreamTiming",
]


class FaultParams(Model):
    """Base of every fault's parameters: `type` selects the fault; the rest is its schema."""


@dataclass(slots=True, frozen=True)
class Respond:
    """Answer the client with this response; upstream is never contacted."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(slots=True, frozen=True)
class Reset:
    """The client sees its connection reset (TCP RST) with no response."""


@dataclass(slots=True, frozen=True)
class Hang:
    """Hold the request without answering for `duration_s` (None: until the client gives up), then reset."""

    duration_s: float | None


class NotApplicable(Exception):
    """Raised by a fault phase that cannot act on this exchange; the message is the reason."""


# Sentinels a StreamEditor returns to end the stream early.
CLOSE = "close"  # end the body cleanly (FIN)
RESET = "reset"  # reset the connection mid-body (RST)


class StreamEditor(ABC):
    """Edits a streamed response event by event; returns the bytes to send in its place."""

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        """Bytes to send for this event ([] drops it), or CLOSE / RESET to end the stream now."""
        return [event.raw]

    def on_end(self) -> list[bytes]:
        """The upstream stream ended: anything to append."""
        return []


@dataclass(slots=True)
class StreamTiming:
    """Pacing of a streamed body that needs real waiting (realised by the proxy's relay)."""

    pause_after_events: int | None = None  # stall: after this many events ...
    pause_s: float = 0.0  # ... pause this long
    bytes_per_s: float | None = None  # throttle: deliver at this rate
    reset_after_bytes: int | None = None  # reset mid-body after this many body bytes
    event_delay_s: float | None = None  # latency on the stream: each chunk reaches the client this much later

    @property
    def paced(self) -> bool:
        """Needs real waits while the body flows (the proxy's relay does them)."""
        return self.pause_after_events is not None or bool(self.bytes_per_s) or bool(self.event_delay_s)


@dataclass
class FaultContext:
    """What a fault gets to act on one exchange."""

    exchange: Exchange
    wire: WireFormat
    rng: random.Random  # seeded from (seed, rule, per-scope counter): reproducible
    sleep: Callable[[float], Awaitable[None]]  # asyncio.sleep in production, a fake in tests
    rule: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    # Kept for this rule and session across exchanges (dropped with the schedule's session counters):
    # what a fault remembers it did in the session, such as an announcement made once.
    session_state: dict[str, Any] = field(default_factory=dict)
    # Kept for this rule across sessions, in this process: what its fault broke for good (see Fault.follows_up).
    rule_memory: dict[str, Any] = field(default_factory=dict)
    now: float = 0.0  # when the engine decided this exchange's rules (seconds since the epoch)


class Fault(ABC):
    """One fault type. Subclasses set `type` and `Params` and override the phases they act in."""

    type: ClassVar[str]
    Params: ClassVar[builtins.type[FaultParams]]
    # MCP eras this fault cannot act in, each with why: a rule that names that era (`match.mcp_era`, or an
    # `mcp_method` only that era has) is refused when the config loads, rather than skipped at run time.
    mcp_eras_refused: ClassVar[Mapping[str, str]] = {}
    # Why this fault cannot act on a stdio MCP server, if it cannot: `brownout mcp-stdio` refuses the rule.
    stdio_refused: ClassVar[str | None] = None

    def __init__(self, params: FaultParams) -> None:
        self.params = params

    @classmethod
    def follows_up(cls, memory: dict[str, Any], exchange: Exchange, now: float) -> str | None:
        """Why this rule's fault acts on `exchange` again whatever its schedule says, because of what it broke
        earlier (`memory`: its FaultContext.rule_memory): an expired session stays expired, a server that is gone
        stays gone. The reason goes to the decision log; None: the schedule decides."""
        return None

    def describe(self) -> dict[str, Any]:
        """Parameters for the fault record, span event and decision log."""
        return self.params.model_dump(exclude_none=True)

    async def before_upstream(self, ctx: FaultContext) -> Respond | Reset | Hang | None:
        return None

    def edit_request(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        """Rewrite the decoded request body before it goes upstream; `headers` may be edited in place."""
        return body

    async def on_response_headers(self, ctx: FaultContext, headers: dict[str, str]) -> None:
        """May await (first-byte latency) or edit `headers` in place."""

    def holds_response(self, ctx: FaultContext) -> bool:
        """True when `on_response_headers` may wait, holding the answer back (a recording then times the
        body where upstream delivers it). By default: whenever this fault has that phase."""
        return type(self).on_response_headers is not Fault.on_response_headers

    def acts_on_handshake(self) -> bool:
        """True when this fault can act on a WebSocket handshake: an upgrade request that upstream answers
        101, with no body. Only the request and response-header phases can (answer instead, delay, drop the
        connection); by default, whenever this fault has one of them. A fault whose params decide it says so."""
        return (
            type(self).before_upstream is not Fault.before_upstream
            or type(self).on_response_headers is not Fault.on_response_headers
        )

    def acts_before_upstream(self) -> bool:
        """True when this fault may act before the request goes upstream: answer or hold it, edit it, pace its
        answer through the relay (which is chosen then), cut streams or announce. A fleet's shared store must
        decide such a rule before the request is forwarded; one whose fault acts only on the answer is
        decided while the request travels. By default: whenever this fault has one of those phases."""
        cls = type(self)
        return any(
            getattr(cls, phase) is not getattr(Fault, phase)
            for phase in ("before_upstream", "edit_request", "stream_timing", "cuts_streams", "announcement")
        )

    def wants_body(self, ctx: FaultContext) -> bool:
        """True when this fault must see a non-streamed body whole (forces buffering)."""
        return False

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        """Edit a whole (decoded) response body; `headers` may be edited in place."""
        return body

    def stream_editor(self, ctx: FaultContext) -> StreamEditor | None:
        return None

    def stream_timing(self, ctx: FaultContext) -> StreamTiming | None:
        return None

    # --- realtime WebSocket sessions (see brownout.faults.events) ----------------------------

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        """What this fault does to one event of a realtime session (a rule with match.event or
        match.direction); raise NotApplicable when it cannot act on this one. Only fault types that
        override it can be given such a rule."""
        return None

    def event_problem(self) -> str | None:
        """Why these params cannot act on WebSocket events (a config error), or None."""
        return None

    def event_only(self) -> bool:
        """True when these params act only on WebSocket events (a rule without match.event is an error)."""
        return False

    @classmethod
    def acts_on_events(cls) -> bool:
        return cls.on_event is not Fault.on_event

    def cuts_streams(self, ctx: FaultContext) -> str | None:
        """Which open streams go down with this fault's failure, as they would with the real one: "server" (the
        server is gone: every stream clients have open to it, such as MCP GET and listen streams), "session"
        (the MCP session is gone: its streams), or None."""
        return None

    def announcement(self, ctx: FaultContext) -> str | None:
        """A server notification (its JSON-RPC method) to send on the session's open subscription streams
        rather than in this exchange's reply, as the request goes upstream: a 2026-07-28 MCP client hears of
        list changes only on its `subscriptions/listen` stream. NotApplicable when there is none to send it on."""
        return None
