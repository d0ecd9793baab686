"""How the faults of one plan act on a stream together: one pacing for them all (`merge_timings`) and one
editor that runs each event through theirs in rule order (`ChainEditor`); and `Skipped`, what a fault phase
that cannot act on an exchange returns instead of raising."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brownout.core.exchange import Exchange
from brownout.core.wire.base import StreamEvent, StreamParser
from brownout.core.wire.framing import SSEFramer, framer_for
from brownout.faults.base import NotApplicable, StreamEditor, StreamTiming

if TYPE_CHECKING:
    from brownout.faults.plan import Plan

__all__ = ["ChainEditor", "Skipped", "merge_timings", "skippable"]


@dataclass(slots=True, frozen=True)
class Skipped:
    """A fault phase raised NotApplicable: the fault cannot act on this exchange, for `reason`."""

    reason: str


def skippable(fn: Any, *args: Any) -> Any:
    """fn(*args), with NotApplicable turned into a Skipped result: not a failure, not counted as one."""
    try:
        return fn(*args)
    except NotApplicable as e:
        return Skipped(str(e))


def merge_timings(timings: Sequence[StreamTiming]) -> StreamTiming | None:
    """One pacing for several faults: the earliest stall (pauses at that event add up), the
    slowest rate, the earliest reset, the longest delay on the stream."""
    if not timings:
        return None
    if len(timings) == 1:
        return timings[0]
    stalls = [t for t in timings if t.pause_after_events is not None and t.pause_s > 0]
    merged = StreamTiming()
    if stalls:
        first = min(t.pause_after_events for t in stalls if t.pause_after_events is not None)
        merged.pause_after_events = first
        merged.pause_s = sum(t.pause_s for t in stalls if t.pause_after_events == first)
    rates = [t.bytes_per_s for t in timings if t.bytes_per_s is not None]
    merged.bytes_per_s = min(rates) if rates else None
    resets = [t.reset_after_bytes for t in timings if t.reset_after_bytes is not None]
    merged.reset_after_bytes = min(resets) if resets else None
    delays = [t.event_delay_s for t in timings if t.event_delay_s]
    merged.event_delay_s = max(delays) if delays else None
    return merged


class ChainEditor(StreamEditor):
    """Runs each event through the faults' editors in rule order; adds response-stage editors
    as soon as the parsed tool calls match their rule."""

    def __init__(self, plan: Plan, editors: list[tuple[str, StreamEditor | None]]) -> None:
        self.plan = plan
        self.editors = editors
        self._ended: str | None = None
        self._seen_calls = 0
        self._probe: tuple[Exchange, StreamParser] | None = None  # parses upstream's events while rules wait

    def _reframe(self, data: bytes) -> list[StreamEvent]:
        ex = self.plan.exchange
        framer = framer_for(ex.content_type if ex is not None else "") or SSEFramer()
        events = framer.feed(data) + framer.flush()
        # Bytes conserved: whitespace-only output still goes to the client.
        return events if events or not data else [StreamEvent(raw=data, data="")]

    def _push(self, events: list[StreamEvent], start: int) -> list[bytes] | str:
        for i in range(start, len(self.editors)):
            name, ed = self.editors[i]
            if ed is None:
                continue
            out: list[StreamEvent] = []
            for ev in events:
                result = self.plan.guard.call(f"fault:{name}", ed.on_event, ev, context="stream event")
                if result is None:
                    # A broken editor drops out; the event continues unedited.
                    self.editors[i] = (name, None)
                    out.append(ev)
                    continue
                if isinstance(result, str):
                    self._ended = result
                    rest = self._push(out, i + 1) if out else []
                    return result if isinstance(rest, str) or not rest else rest
                if len(result) == 1 and (result[0] is ev.raw or result[0] == ev.raw):
                    out.append(ev)
                else:
                    for chunk in result:
                        out.extend(self._reframe(chunk))
            events = out
        return [ev.raw for ev in events]

    def _pick_up_tools(self, event: StreamEvent) -> None:
        """The tool calls upstream's events make so far, parsed event by event before any is edited: the
        proxy parses the record only once a chunk is edited, and one chunk may hold a call and its
        arguments."""
        plan = self.plan
        if not plan.deferred:
            return
        if self._probe is None:
            probe, wire = plan.probe(), plan.wire
            if probe is None or wire is None:
                return
            parser = plan.guard.call("wire", wire.stream_parser, probe, context=f"{wire.provider} stream")
            if parser is None:
                return
            self._probe = (probe, parser)
        probe, parser = self._probe
        try:
            parser.feed(event)
        except Exception as e:  # noqa: BLE001 - a broken parser stops deciding tools, never the stream
            plan.guard.failed("wire", e, f"{plan.wire.provider if plan.wire else ''} stream event (tool rules)")
            plan.deferred = []
            return
        if len(probe.tool_calls) == self._seen_calls:
            return
        self._seen_calls = len(probe.tool_calls)
        for f in plan.resolve_pending(probe):
            ed = plan.guard.call(f"fault:{f.type}", skippable, f.fault.stream_editor, f.ctx, context="stream_editor")
            if isinstance(ed, Skipped):
                plan.skip(f, ed.reason)
                continue
            if ed is not None:
                self.editors.append((f.type, ed))

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        if self._ended is not None:
            return self._ended
        self._pick_up_tools(event)
        return self._push([event], 0)

    def on_end(self) -> list[bytes]:
        if self._ended is not None:
            return []
        out: list[bytes] = []
        for i, (name, ed) in enumerate(list(self.editors)):
            if ed is None:
                continue
            tail = self.plan.guard.call(f"fault:{name}", ed.on_end, context="stream end")
            if not tail:
                continue
            events = [ev for chunk in tail for ev in self._reframe(chunk)]
            result = self._push(events, i + 1)
            if isinstance(result, str):
                return out
            out.extend(result)
        return out
