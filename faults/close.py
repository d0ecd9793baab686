"""close: end a realtime WebSocket session with a chosen close code, after the provider's warning.

On an event (match.event / match.direction) the session closes once that event has passed; with
`after_s` it closes when the session is that old (decided at the upgrade, like a provider's session
cap). The warning is the provider's own: OpenAI's `error` with code `session_expired` (then 1001),
Gemini's `goAway{timeLeft}` (then 1011). A rejected resumption is code 1008 on Gemini's `setup`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from brownout.core.wire.realtime import CloseSpec, RealtimeCodec, RealtimeEvent
from brownout.faults.base import Fault, FaultContext, FaultParams
from brownout.faults.events import CloseAction, EventAction

__all__ = ["CloseFault", "CloseParams"]

# Close codes an endpoint may not put in a close frame (RFC 6455 7.4.1): they only describe closes.
_RESERVED = frozenset({1004, 1005, 1006, 1015})
MAX_WARNING_MS = 3_600_000.0


class CloseParams(FaultParams):
    """Parameters of the close fault."""

    type: Literal["close"]
    code: int | None = Field(
        None, ge=1000, le=4999, description="Close code; absent: the provider's (OpenAI 1001, Gemini 1011)."
    )
    reason: str | None = Field(None, max_length=123, description="Close reason; absent: the provider's.")
    warning: bool = Field(True, description="Send the provider's warning first (session_expired, goAway).")
    warning_ms: float = Field(0, ge=0, le=MAX_WARNING_MS, description="Time from the warning to the close.")
    after_s: float | None = Field(
        None, gt=0, description="Close the session when it is this old (instead of on an event)."
    )

    @field_validator("code")
    @classmethod
    def _sendable(cls, code: int | None) -> int | None:
        if code is not None and (code in _RESERVED or 1016 <= code <= 2999):
            raise ValueError(
                f"close code {code} cannot be sent in a close frame (1004-1006, 1015, 1016-2999 are reserved)"
            )
        return code

    @field_validator("reason")
    @classmethod
    def _fits(cls, reason: str | None) -> str | None:
        if reason is not None and len(reason.encode()) > 123:
            raise ValueError("a close reason is at most 123 bytes of UTF-8")
        return reason


class CloseFault(Fault):
    """Closes the session as the provider does when it ends one: warning, then close frame."""

    type = "close"
    Params = CloseParams
    params: CloseParams

    def acts_on_handshake(self) -> bool:
        return self.params.after_s is not None  # decided at the upgrade, acted on by the session's clock

    def event_only(self) -> bool:
        return self.params.after_s is None

    def event_problem(self) -> str | None:
        if self.params.after_s is not None:
            return "close with after_s closes a session by its age: leave match.event and match.direction out"
        return None

    def action(self, codec: RealtimeCodec | None) -> CloseAction:
        """The close for a session (`codec` None: not a realtime format, so no warning and code 1001)."""
        p = self.params
        default = codec.default_close() if codec is not None else CloseSpec(1001, "")
        spec = CloseSpec(
            p.code if p.code is not None else default.code, p.reason if p.reason is not None else default.reason
        )
        warning_s = p.warning_ms / 1000
        warning = tuple(codec.close_warning(warning_s)) if codec is not None and p.warning else ()
        return CloseAction(spec, warning, warning_s)

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        return EventAction(close=self.action(event.codec))
