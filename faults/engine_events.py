"""The fault engine's side of realtime WebSocket sessions: rules decided per event (match.event / direction).

An event is decided in mitmproxy's message hook, and mitmproxy relays the message once the hook returns:
waiting there would hold the whole session, both ways. So every decision is made in the process, and an
event is over as soon as it passes (in-flight slots free at once). With a shared schedule store (a fleet
on Redis) a counted rule cannot be checked against the fleet's counters in time: it is skipped as
`skipped_state_unavailable`, as a counted tool rule is mid-stream, so a fleet never exceeds a cap it
could not check; probability-only rules act as in one process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brownout.core.exchange import Exchange
from brownout.core.state.schedule import SKIPPED_STATE_UNAVAILABLE
from brownout.core.wire.base import WireFormat
from brownout.faults.plan import Fired
from brownout.faults.schedule import SKIPPED_PAUSED, Schedule, Ticket

if TYPE_CHECKING:
    from brownout.faults.engine import CompiledRule

__all__ = ["EVENT_UNSHARED", "EventRules"]

EVENT_UNSHARED = "a realtime event, decided as it passes, where the shared store cannot be awaited"


class EventRules:
    """Mixed into FaultEngine: the decisions on realtime events."""

    _event_rules: tuple[CompiledRule, ...]
    _shared: bool
    clock: Callable[[], float]
    paused: bool
    _decide: Callable[..., tuple[Fired | None, tuple[Schedule, Ticket] | None]]
    _record: Callable[..., None]

    @property
    def has_event_rules(self) -> bool:
        """Some enabled rule acts on WebSocket events (a realtime session then asks per event)."""
        return bool(self._event_rules)

    def plan_event(self, exchange: Exchange, wire: WireFormat, event: Any) -> list[Fired]:
        """Decide the event rules for one realtime event.

        `exchange` is the one the event belongs to (its generation, else the session): fired faults
        are recorded there."""
        fired: list[Fired] = []
        now = 0.0
        for rule in self._event_rules:
            if not rule.match.event_stage(exchange, event.type, event.direction, event.tools):
                continue
            now = now or self.clock()
            if self.paused:
                self._record(exchange, rule, SKIPPED_PAUSED, "engine paused", 0, 0, now)
                continue
            if self._shared and rule.counted:
                self._record(exchange, rule, SKIPPED_STATE_UNAVAILABLE, EVENT_UNSHARED, 0, 0, now)
                continue
            f, release = self._decide(rule, exchange, wire, now, None)
            if release is not None:
                Schedule.release(release[1], now, 0)
            if f is not None:
                fired.append(f)
        return fired
