"""A Plan: the faults that fired for one exchange, behind the same phases as `Fault`.

The proxy calls the phases in order (before_upstream, edit_request, on_response_headers, then
edit_body or stream_editor/stream_timing) and `finish()` once the exchange ends. Each
fault call goes through the engine's guard (component "fault:<type>"): a fault that raises
is treated as "no fault" and the others still act.

Response-stage rules (a `tool` glob on an LLM response) are decided when the tool calls
are known: in `edit_body` (the proxy parses the body first) or inside the chained stream
editor (the proxy feeds the wire parser each event before the editor). Only `edit_body`
and `stream_editor` of such faults are ever called; their other phases are already past.

With a shared schedule store (a fleet on Redis), the matched rules are `pending` after `plan()` until
the proxy awaits `engine.settle(plan)` (one round trip for all of them); a buffered body's
response-stage rules are settled by `settle_deferred` before the body is edited.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from brownout.core.exchange import Exchange, FaultRecord
from brownout.core.guard import Guard
from brownout.core.wire.base import WireFormat
from brownout.faults.base import (
    Fault,
    FaultContext,
    Hang,
    NotApplicable,
    Reset,
    Respond,
    StreamEditor,
    StreamTiming,
)
from brownout.faults.plan_stream import ChainEditor, Skipped, merge_timings, skippable

__all__ = ["EMPTY_PLAN", "ChainEditor", "Fired", "Plan", "PlanHost", "merge_timings"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Fired:
    """One fault that fired for this exchange, with its context."""

    rule: str
    type: str
    fault: Fault
    ctx: FaultContext
    record: FaultRecord


class PlanHost(Protocol):
    """What a Plan needs from its engine."""

    guard: Guard

    def resolve_deferred(self, plan: Plan, rule: Any, tool: str) -> Fired | None: ...

    async def resolve_deferred_shared(self, plan: Plan, matches: list[tuple[Any, str]]) -> list[Fired]: ...

    def release(self, plan: Plan) -> None: ...

    def skip(self, plan: Plan, fired: Fired, reason: str) -> None: ...


class Plan:
    """The fired faults of one exchange; empty for most traffic."""

    __slots__ = ("_finished", "_host", "at", "deferred", "exchange", "fired", "pending", "releases", "wire")

    def __init__(
        self,
        host: PlanHost | None,
        exchange: Exchange | None,
        wire: WireFormat | None,
        fired: list[Fired] | None = None,
        deferred: list[Any] | None = None,
        releases: list[Any] | None = None,
    ) -> None:
        self._host = host
        self.exchange = exchange
        self.wire = wire
        self.fired: list[Fired] = fired if fired is not None else []
        self.deferred: list[Any] = deferred if deferred is not None else []  # rules awaiting the response
        self.releases: list[Any] = releases if releases is not None else []  # (schedule, ticket) pairs
        self.pending: list[Any] | None = None  # rules a shared store decides: engine.settle(plan)
        self.at = 0.0  # when the rules were matched (pending ones are decided as of then)
        self._finished = False

    @property
    def empty(self) -> bool:
        """Nothing fired, pending or to release: the proxy may skip the plan (and finish())."""
        return not self.fired and not self.deferred and not self.releases and not self.pending

    @property
    def decided_in_flight(self) -> bool:
        """Every pending rule's fault acts only on the answer: the store may decide them while the request
        travels upstream (their faults join the plan before its response phases run)."""
        pending = self.pending
        return pending is not None and all(rule.in_flight for rule in pending)

    @property
    def records(self) -> list[FaultRecord]:
        return [f.record for f in self.fired]

    @property
    def guard(self) -> Guard:
        assert self._host is not None, "EMPTY_PLAN has no faults to run"
        return self._host.guard

    def skip(self, f: Fired, reason: str) -> None:
        """This fault cannot act on the exchange: it leaves the plan and is recorded as skipped."""
        if any(x is f for x in self.fired):
            self.fired = [x for x in self.fired if x is not f]
            if self._host is not None:
                self._host.skip(self, f, reason)

    def skip_body_faults(self, reason: str) -> None:
        """The body cannot be read or edited (too large, undecodable): every fault that needed it is skipped."""
        for f in list(self.fired):
            if self.guard.call(f"fault:{f.type}", f.fault.wants_body, f.ctx, context="wants_body"):
                self.skip(f, reason)

    async def before_upstream(self, *, sent: str | None = None) -> Respond | Reset | Hang | None:
        """Run request-phase faults in rule order; the first answer wins, delays add up.

        `sent`: why the request is already on its way upstream (it streamed): a fault that would answer,
        reset or hold it instead can no longer, and is skipped with that reason."""
        for f in list(self.fired):
            result = await self.guard.acall(
                f"fault:{f.type}", _askippable, f.fault.before_upstream, f.ctx, context="before_upstream"
            )
            if isinstance(result, Skipped):
                self.skip(f, result.reason)
                continue
            if result is not None and sent is not None:
                self.skip(f, sent)
                continue
            _note(f)
            if result is not None:
                return result
        return None

    def cuts_streams(self) -> set[str]:
        """What fired faults take down with them: "server", "session" (see Fault.cuts_streams)."""
        found = (
            self.guard.call(f"fault:{f.type}", f.fault.cuts_streams, f.ctx, context="cuts_streams") for f in self.fired
        )
        return {scope for scope in found if isinstance(scope, str)}

    def announcements(self) -> list[str]:
        """The notifications fired faults send on the session's subscription streams (see Fault.announcement)."""
        found: list[str] = []
        for f in list(self.fired):
            method = self.guard.call(f"fault:{f.type}", skippable, f.fault.announcement, f.ctx, context="announcement")
            if isinstance(method, Skipped):
                self.skip(f, method.reason)
            elif isinstance(method, str):
                found.append(method)
                _note(f)
        return found

    def edits_request(self) -> bool:
        """True when a fired fault rewrites requests (the proxy then decodes the body for it)."""
        return any(type(f.fault).edit_request is not Fault.edit_request for f in self.fired)

    def holds_response(self) -> bool:
        """True when a fired fault may hold the answer back at its headers (a first-byte delay)."""
        return any(
            self.guard.call(f"fault:{f.type}", f.fault.holds_response, f.ctx, default=False, context="holds_response")
            for f in self.fired
        )

    def skip_request_faults(self, reason: str) -> None:
        """The request body cannot be read (too large once decoded, undecodable): request edits are skipped."""
        for f in list(self.fired):
            if type(f.fault).edit_request is not Fault.edit_request:
                self.skip(f, reason)

    def edit_request(self, body: bytes, headers: dict[str, str]) -> bytes:
        """Apply request edits in rule order to the decoded body; the exchange is re-read from the result.

        A signed request (its wire format's `signs_requests`) is never edited: its faults are skipped."""
        if self.wire is not None and self.wire.signs_requests:
            self.skip_request_faults(f"{self.wire.provider} requests are signed (AWS SigV4): never altered")
            return body
        edited = body
        for f in self.fired:
            out = self.guard.call(
                f"fault:{f.type}", f.fault.edit_request, f.ctx, edited, headers, context="edit_request"
            )
            _note(f)
            if out is not None:
                edited = out
        if edited != body and self.wire is not None and self.exchange is not None:
            self.guard.call("wire", self.wire.reparse_request, self.exchange, edited, context="edited request")
        return edited

    async def on_response_headers(self, status: int, headers: dict[str, str]) -> None:
        """First-byte delays and header edits; `headers` is edited in place."""
        for f in self.fired:
            await self.guard.acall(f"fault:{f.type}", f.fault.on_response_headers, f.ctx, headers)
            _note(f)

    def wants_body(self) -> bool:
        """True when a fault needs the whole non-streamed body (a pending tool rule does too)."""
        for f in self.fired:
            if self.guard.call(f"fault:{f.type}", f.fault.wants_body, f.ctx, default=False, context="wants_body"):
                return True
        return bool(self.deferred) and self.exchange is not None and not self.exchange.stream

    def resolve_pending(self, calls: Exchange | None = None) -> list[Fired]:
        """Decide deferred tool rules whose tool the response now calls; returns the new faults.

        `calls`: where the response's tool calls were parsed (default: the exchange itself)."""
        if not self.deferred or self._host is None or self.exchange is None:
            return []
        calls = calls if calls is not None else self.exchange
        new: list[Fired] = []
        still: list[Any] = []
        for rule in self.deferred:
            tool = rule.match.response_match(calls)
            if tool is None:
                still.append(rule)
                continue
            fired = self._host.resolve_deferred(self, rule, tool)
            if fired is not None:
                self.fired.append(fired)
                new.append(fired)
        self.deferred = still
        return new

    async def settle_deferred(self, body: bytes, *, off_loop: bool = False) -> None:
        """Decide the response-stage rules on a whole body now, with one await of the shared store (the
        synchronous `edit_body` could not await it); `off_loop`: parse the body in a worker thread."""
        if not self.deferred or self._host is None:
            return
        calls = await asyncio.to_thread(self._tool_calls_of, body) if off_loop else self._tool_calls_of(body)
        if calls is None:
            return
        matches: list[tuple[Any, str]] = []
        for rule in self.deferred:
            tool = rule.match.response_match(calls)
            if tool is not None:
                matches.append((rule, tool))
        self.deferred = []  # the whole body is known: a rule it does not match never will
        if matches:
            self.fired.extend(await self._host.resolve_deferred_shared(self, matches))

    def edit_body(self, body: bytes, headers: dict[str, str]) -> bytes:
        """Apply body faults in rule order to a whole decoded body."""
        if self.deferred:
            self.resolve_pending(self._tool_calls_of(body))
        for f in list(self.fired):
            body = self._edited(f, body, self._edit(f, body, headers))
        return body

    async def edit_body_off_loop(self, body: bytes, headers: dict[str, str]) -> bytes:
        """`edit_body` with the work on the body (parsing it, each fault's edit) in a worker thread,
        so a large body does not hold up other exchanges; decisions and records stay on the loop."""
        if self.deferred:
            self.resolve_pending(await asyncio.to_thread(self._tool_calls_of, body))
        for f in list(self.fired):
            body = self._edited(f, body, await asyncio.to_thread(self._edit, f, body, headers))
        return body

    def _edit(self, f: Fired, body: bytes, headers: dict[str, str]) -> Any:
        return self.guard.call(
            f"fault:{f.type}", skippable, f.fault.edit_body, f.ctx, body, headers, context="edit_body"
        )

    def _edited(self, f: Fired, body: bytes, edited: Any) -> bytes:
        if isinstance(edited, Skipped):
            self.skip(f, edited.reason)  # the engine's records: on the loop
            return body
        return body if edited is None else edited

    def _tool_calls_of(self, body: bytes) -> Exchange | None:
        """The tool calls a whole response body makes, parsed into a scratch exchange.

        The proxy parses the body after the faults edit it (the record says what the agent got), so
        a rule waiting for a tool the response calls looks at a parse of its own."""
        probe, wire = self.probe(), self.wire
        if probe is None or wire is None:
            return None
        self.guard.call("wire", wire.parse_response, probe, body, context=f"{wire.provider} response")
        return probe

    def probe(self) -> Exchange | None:
        """A scratch exchange like this one's, for a parse of upstream's answer that is not the record."""
        ex = self.exchange
        if ex is None or self.wire is None:
            return None
        return Exchange(
            id=ex.id,
            session=ex.session,
            provider=ex.provider,
            operation=ex.operation,
            content_type=ex.content_type,
            capture_max_bytes=ex.capture_max_bytes,
        )

    def stream_editor(self) -> StreamEditor | None:
        """A chain of the faults' stream editors, or None when nothing edits the stream."""
        editors: list[tuple[str, StreamEditor | None]] = []
        for f in list(self.fired):
            ed = self.guard.call(f"fault:{f.type}", skippable, f.fault.stream_editor, f.ctx, context="stream_editor")
            if isinstance(ed, Skipped):
                self.skip(f, ed.reason)
                continue
            if ed is not None:
                editors.append((f.type, ed))
        if not editors and not self.deferred:
            return None
        return ChainEditor(self, editors)

    def stream_timing(self) -> StreamTiming | None:
        """The fired faults' stream pacing merged into one (see merge_timings)."""
        timings: list[StreamTiming] = []
        for f in self.fired:
            t = self.guard.call(f"fault:{f.type}", f.fault.stream_timing, f.ctx, context="stream_timing")
            if t is not None:
                timings.append(t)
        return merge_timings(timings)

    def finish(self) -> None:
        """Release concurrency slots and count quota tokens; safe to call more than once."""
        for f in self.fired:
            _note(f)  # values body and stream editors found while editing
        if self._finished:
            return
        self._finished = True
        if self._host is not None and self.releases:
            self._host.release(self)


async def _askippable(fn: Any, *args: Any) -> Any:
    """`skippable` for a coroutine phase."""
    try:
        return await fn(*args)
    except NotApplicable as e:
        return Skipped(str(e))


def _note(f: Fired) -> None:
    # Values a fault sampled while acting (e.g. latency's delay_s) belong on its record.
    if f.ctx.extra:
        f.record.params.update(f.ctx.extra)


# Shared by every exchange no rule matched: it holds no state, so one instance serves all.
EMPTY_PLAN = Plan(None, None, None)
