"""duplicate: an event of a realtime WebSocket session arrives more than once."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.base import Fault, FaultContext, FaultParams
from brownout.faults.events import EventAction

__all__ = ["DuplicateFault", "DuplicateParams"]


class DuplicateParams(FaultParams):
    """Parameters of the duplicate fault."""

    type: Literal["duplicate"]
    copies: int = Field(1, ge=1, le=10, description="Extra copies sent right after the event.")


class DuplicateFault(Fault):
    """Delivers the matched event, then the same bytes again (a redelivery a client must tolerate)."""

    type = "duplicate"
    Params = DuplicateParams
    params: DuplicateParams

    def event_only(self) -> bool:
        return True

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        return EventAction(copies=self.params.copies)
