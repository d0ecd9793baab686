"""drop: an event of a realtime WebSocket session never reaches its peer."""

from __future__ import annotations

from typing import Literal

from brownout.core.wire.realtime import RealtimeEvent
from brownout.faults.base import Fault, FaultContext, FaultParams
from brownout.faults.events import EventAction

__all__ = ["DropFault", "DropParams"]


class DropParams(FaultParams):
    """Parameters of the drop fault (none but the type: match.event picks the events)."""

    type: Literal["drop"]


class DropFault(Fault):
    """Drops the matched event, as a lost or never-sent message would be."""

    type = "drop"
    Params = DropParams
    params: DropParams

    def event_only(self) -> bool:
        return True

    def on_event(self, ctx: FaultContext, event: RealtimeEvent) -> EventAction | None:
        return EventAction(drop=True)
