"""Faults on the events of a realtime WebSocket session (OpenAI Realtime, Gemini Live).

A rule whose `match` names `event` (a glob on the event type) or `direction` (server or client) is
decided per event, never at the upgrade request. Its fault says what happens to the event through
`Fault.on_event`, which returns an `EventAction`; the proxy realises it (it holds the socket):

    drop            the event never reaches its peer
    delay_s         it arrives later; events behind it in the same direction wait their turn (the
                    order of a stream is kept), the other direction flows on
    replace         its bytes change (a corrupted tool call)
    before / after  brownout's own messages go out around it (an error event, a rate-limit update)
    copies          it arrives more than once
    cut             its generation ends early: what the provider sends instead of the rest
    rewrite         later events of its generation go through an edit too (a tool call broken everywhere
                    it is repeated)
    close           after it, the session closes with a code and reason (after the provider's warning)
    reset           the connection drops instead (the client sees 1006)

Several faults on one event combine: delays add up, a drop, a cut or a reset wins over delivery, the
first close wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from brownout.core.wire.realtime import CloseSpec, Generation, WsOut

__all__ = ["CloseAction", "EventAction", "GenerationCut"]


@dataclass(slots=True, frozen=True)
class CloseAction:
    """Close the session: `warning` first (the provider's own notice), `warning_s` later the close frame."""

    spec: CloseSpec
    warning: tuple[WsOut, ...] = ()
    warning_s: float = 0.0


@dataclass(slots=True, frozen=True)
class GenerationCut:
    """End `generation` early: `after_events` more of its events get through, then `end` instead of the rest."""

    generation: Generation
    end: WsOut | CloseSpec
    after_events: int = 0


@dataclass(slots=True)
class EventAction:
    """What faults do to one event (see the module docstring)."""

    delay_s: float = 0.0
    drop: bool = False
    replace: WsOut | None = None
    before: list[WsOut] = field(default_factory=list)
    after: list[WsOut] = field(default_factory=list)
    copies: int = 0
    cut: GenerationCut | None = None
    rewrite: tuple[Generation, Callable[[str], str]] | None = None
    close: CloseAction | None = None
    reset: bool = False

    def merge(self, other: EventAction) -> None:
        """Fold a later fault's action into this one (rule order)."""
        self.delay_s += other.delay_s
        self.drop = self.drop or other.drop
        if other.replace is not None:
            self.replace = other.replace
        self.before += other.before
        self.after += other.after
        self.copies += other.copies
        self.cut = self.cut or other.cut
        self.rewrite = self.rewrite or other.rewrite
        self.close = self.close or other.close
        self.reset = self.reset or other.reset
