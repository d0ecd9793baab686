"""The fault engine: which rules fire for an exchange, recorded and reproducible.

`plan(exchange, wire)` runs on every request: rules are compiled at load (globs to regexes,
schedules to counters), so an exchange no rule matches costs one cheap check per rule and
gets the shared `EMPTY_PLAN`. Rules are evaluated in config order; every match is a
recorded `Decision`. A fault that raises is contained by the engine's guard (counted as
"fault:<type>", logged once; raised by a strict guard); the exchange then proceeds as if it
had not fired.

Threading: all methods are meant for the proxy's event-loop thread (no locks on counters), except
`prepare`, which compiles a hot reload's rules on another thread.

Hot reload (`reload`): a rule whose name is unchanged keeps its counters (matches,
injections, in-flight slots, quota window) unless its scope or quota changed; renamed or
new rules start from zero; the engine's start time (origin of `start_s` windows) and the
kill switch (`paused`) survive. `enabled` comes from the new config, discarding earlier
`set_rule_enabled` overrides: the file is the source of truth.

Response-stage rules (a `tool` glob that only an LLM response can answer) count a match
only once the response calls a matching tool; quota rules are request-stage only.

Pause (`pause()`): matching rules are logged as `skipped_paused` and their counters do
not advance, so resuming continues the same decision sequence.

Overlay (`set_overlay`): an experiment phase's rules, run after the config's for a while; see
faults/engine_overlay.py.

Schedule store (`store=`): memory by default, decided inside `plan` as it always was; a shared one
(a fleet on Redis) decides the matched rules in one awaited round trip: see faults/engine_shared.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from brownout.core.exchange import Exchange, FaultRecord
from brownout.core.guard import Guard
from brownout.core.state.schedule import SKIPPED_STATE_UNAVAILABLE, ScheduleStore
from brownout.core.state.schedule_memory import MemorySchedules
from brownout.core.wire.base import WireFormat
from brownout.faults.base import Fault, FaultContext
from brownout.faults.config import RuleConfig
from brownout.faults.decisions import Decision, DecisionLog
from brownout.faults.engine_events import EventRules
from brownout.faults.engine_overlay import OverlayRules
from brownout.faults.engine_shared import SharedSchedules, counters_key
from brownout.faults.match import ByHost, CompiledMatch, Stage
from brownout.faults.plan import EMPTY_PLAN, Fired, Plan
from brownout.faults.quota import QuotaExceeded, QuotaParams
from brownout.faults.rules import CompiledRule, RuleSet, websocket_handshake
from brownout.faults.schedule import FIRED, SKIPPED_NOT_APPLICABLE, SKIPPED_PAUSED, Schedule, Ticket, rng_for

__all__ = ["CompiledRule", "FaultEngine", "Plan", "RuleSet"]

log = logging.getLogger(__name__)


class FaultEngine(SharedSchedules, OverlayRules, EventRules):
    """Decides, per exchange, which rules fire, and hands the proxy a Plan of their faults."""

    def __init__(
        self,
        ruleset: RuleSet | None = None,
        *,
        guard: Guard | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        decision_log: DecisionLog | None = None,
        max_sessions: int = 10_000,
        store: ScheduleStore | None = None,
    ) -> None:
        self.clock = clock
        self.guard = guard if guard is not None else Guard()  # contains, counts and logs fault errors
        self.sleep = sleep
        self.decisions = decision_log if decision_log is not None else DecisionLog(guard=self.guard)
        self.max_sessions = max_sessions
        self.paused = False
        self.started_at = clock()
        self.origin = self.started_at  # base of start_s windows: this process's start, or the fleet's
        self.store: ScheduleStore = store if store is not None else MemorySchedules()
        self._shared = self.store.shared
        self._tasks: set[asyncio.Task[None]] = set()
        self.ruleset = ruleset if ruleset is not None else RuleSet()
        self.overlay: tuple[CompiledRule, ...] = ()  # an experiment phase's rules (engine_overlay.py)
        self.rules: list[CompiledRule] = self._compile(self.ruleset, {})
        self._active: tuple[CompiledRule, ...] = ()
        self._by_host: ByHost[CompiledRule] = ByHost((), lambda r: r.match)
        self._event_rules: tuple[CompiledRule, ...] = ()  # rules decided per WebSocket event
        self._refresh_active()

    # --- configuration -------------------------------------------------------------------

    def _compile(self, ruleset: RuleSet, previous: dict[str, CompiledRule]) -> list[CompiledRule]:
        registry = ruleset.fault_types
        out: list[CompiledRule] = []
        for rc in ruleset.rules:
            if rc.fault is None:
                fault_cls: type[Fault] = QuotaExceeded
            else:
                cls = registry.get(rc.fault_type)
                if cls is None:
                    valid = ", ".join(sorted(registry))
                    raise ValueError(f"rule {rc.name!r}: unknown fault type {rc.fault_type!r}; valid types: {valid}")
                fault_cls = cls
            schedule = Schedule(
                rc.schedule,
                rule=rc.name,
                seed=ruleset.seed,
                origin=self.origin,
                session_ttl_s=ruleset.session_ttl_s,
                max_sessions=self.max_sessions,
            )
            old = previous.get(rc.name)
            if old is not None:
                schedule.adopt(old.schedule)
            quota = rc.schedule.quota
            out.append(
                CompiledRule(
                    name=rc.name,
                    config=rc,
                    match=CompiledMatch(rc.match, llm_providers=ruleset.llm_providers),
                    schedule=schedule,
                    fault_cls=fault_cls,
                    fault_type=rc.fault_type,
                    enabled=rc.enabled,
                    counts_tokens=quota is not None and quota.tokens_per_min is not None,
                    acts_on_handshake=rc.fault is None or self._acts_on_handshake(fault_cls, rc),
                    counted=schedule.spec.counted,
                    in_flight=quota is None and rc.fault is not None and not self._acts_before_upstream(fault_cls, rc),
                    key=counters_key(rc),
                    memory=old.memory if old is not None else {},
                    follows_up=getattr(fault_cls.follows_up, "__func__", None)
                    is not getattr(Fault.follows_up, "__func__", None),
                )
            )
        return out

    def _acts_on_handshake(self, fault_cls: type[Fault], rc: RuleConfig) -> bool:
        return self._asks(fault_cls, rc, "acts_on_handshake")

    def _acts_before_upstream(self, fault_cls: type[Fault], rc: RuleConfig) -> bool:
        return self._asks(fault_cls, rc, "acts_before_upstream")

    def _asks(self, fault_cls: type[Fault], rc: RuleConfig, question: str) -> bool:
        """What the rule's fault answers to a yes/no `question` about itself; yes when it fails to say.
        A plugin fault that cannot be built here fails later, where the guard contains it for the exchange."""
        fault = self.guard.call(f"fault:{rc.fault_type}", fault_cls, rc.fault, context="creating the fault")
        return fault is None or bool(self.guard.call(f"fault:{rc.fault_type}", getattr(fault, question), default=True))

    def _refresh_active(self) -> None:
        self._active = tuple(r for r in self.rules if r.enabled)
        self._by_host = ByHost(self._active, lambda r: r.match)
        self._event_rules = tuple(r for r in self._active if r.match.on_events)

    def prepare(self, ruleset: RuleSet) -> list[CompiledRule]:
        """`ruleset` compiled for `reload`; raises ValueError for a rule it cannot run.

        Safe on another thread than the loop's (thousands of rules take a while to compile): it only
        reads the live rules, and a kept rule's new schedule shares their counters, which are only ever
        changed in place, so what the loop counts in the meantime is kept."""
        return self._compile(ruleset, {r.name: r for r in self.rules})

    def reload(self, ruleset: RuleSet, prepared: list[CompiledRule] | None = None) -> None:
        """Switch to new validated rules for new exchanges (see module docstring), at once when they
        were `prepare`d already."""
        rules = prepared if prepared is not None else self.prepare(ruleset)  # raises before swapping
        self.ruleset = ruleset
        self.rules = self._with_overlay(rules)
        self._refresh_active()
        log.info("fault engine: %d rules loaded (%d enabled)", len(rules), len(self._active))

    def pause(self) -> None:
        """Kill switch: stop all injection at once."""
        self.paused = True
        log.warning("fault engine paused: no faults will be injected")

    def resume(self) -> None:
        self.paused = False
        log.warning("fault engine resumed")

    def set_rule_enabled(self, name: str, enabled: bool) -> None:
        """Turn one rule on or off at runtime; raises KeyError for an unknown name."""
        for rule in self.rules:
            if rule.name == name:
                rule.enabled = enabled
                self._refresh_active()
                return
        raise KeyError(f"no rule named {name!r}; rules: {', '.join(r.name for r in self.rules)}")

    def active_rules(self, now: float | None = None) -> dict[str, bool]:
        """Rule name -> enabled and inside its time window (for the rule-active gauge)."""
        t = self.clock() if now is None else now
        return {r.name: r.enabled and not self.paused and r.schedule.is_active(t) for r in self.rules}

    def status(self) -> dict[str, Any]:
        """A JSON-ready snapshot for the control API."""
        now = self.clock()
        return {
            "paused": self.paused,
            "seed": self.ruleset.seed,
            "started_at": self.started_at,
            "uptime_s": now - self.started_at,
            "rules": [
                {"name": r.name, "fault": r.fault_type, "enabled": r.enabled, **r.schedule.status(now)}
                for r in self.rules
            ],
            "decisions": dict(self.decisions.counts),
        }

    # --- the hot path --------------------------------------------------------------------

    def plan(self, exchange: Exchange, wire: WireFormat) -> Plan:
        """Decide the request-stage rules for this exchange; returns EMPTY_PLAN when none applies."""
        fired: list[Fired] | None = None
        deferred: list[CompiledRule] | None = None
        releases: list[tuple[Schedule, Ticket]] | None = None
        pending: list[CompiledRule] | None = None
        now = 0.0
        matched = False
        for rule in self._by_host(exchange.host):
            if rule.memory and rule.follows_up and not self.paused:
                # What the fault broke earlier stays broken, whatever the match, schedule and counters say.
                why = self._follow_up(rule, exchange, now := self.clock())
                if why is not None:
                    matched = True
                    f, _ = self._decide(rule, exchange, wire, now, None, Ticket(FIRED, why, 0, 0))
                    if f is not None:
                        (fired := fired or []).append(f)
                    continue
            stage = rule.match.request_stage(exchange)
            if stage is Stage.NO:
                continue
            if not matched:
                now, matched = self.clock(), True
            if self.paused:
                self._record(exchange, rule, SKIPPED_PAUSED, "engine paused", 0, 0, now)
                continue
            if not rule.acts_on_handshake and websocket_handshake(exchange):
                # Upstream answers 101 and the connection becomes a WebSocket: no body for this fault. Not a
                # match the rule counts either, so its schedule goes on as if the handshake had not been seen.
                reason = f"a WebSocket handshake (101, no body): {rule.fault_type} cannot act on it"
                self._record(exchange, rule, SKIPPED_NOT_APPLICABLE, reason, 0, 0, now)
                continue
            if stage is Stage.DEFER:
                # Quota rules answer before upstream, so a tool known only later cannot gate them.
                if rule.config.schedule.quota is None:
                    (deferred := deferred or []).append(rule)
                continue
            if self._shared:
                # The shared store decides every matched rule, in config order, in one round trip (settle).
                (pending := pending or []).append(rule)
                continue
            f, release = self._decide(rule, exchange, wire, now, None)
            if release is not None:
                (releases := releases or []).append(release)
            if f is not None:
                (fired := fired or []).append(f)
        if fired is None and deferred is None and releases is None and pending is None:
            return EMPTY_PLAN
        plan = Plan(self, exchange, wire, fired, deferred, releases)
        if pending is not None:
            plan.pending, plan.at = pending, now
        return plan

    def _follow_up(self, rule: CompiledRule, exchange: Exchange, now: float) -> str | None:
        why: str | None = self.guard.call(
            f"fault:{rule.fault_type}", rule.fault_cls.follows_up, rule.memory, exchange, now, context="follows_up"
        )
        return why

    def _decide(
        self,
        rule: CompiledRule,
        exchange: Exchange,
        wire: WireFormat | None,
        now: float,
        tool: str | None,
        ticket: Ticket | None = None,
    ) -> tuple[Fired | None, tuple[Schedule, Ticket] | None]:
        """Decide (on this process's counters, unless a shared store's `ticket` is given) and record it;
        when it fired, build the fault; also what to release at the end."""
        if ticket is None:
            schedule = rule.schedule
            ticket = schedule.counters.decide(exchange.session, now, schedule.window_start(now))
        reason = ticket.reason if tool is None else f"{ticket.reason}; response calls tool {tool!r}"
        self._record(exchange, rule, ticket.outcome, reason, ticket.counter, ticket.index, now)
        needs_release = (
            bool(ticket.scopes) or ticket.hold is not None or (ticket.quota is not None and rule.counts_tokens)
        )
        release = (rule.schedule, ticket) if needs_release else None
        if ticket.outcome != FIRED:
            return None, release
        # A fault that cannot even be built (a plugin's bug) is contained: the exchange goes on without it.
        fired = self.guard.call(
            f"fault:{rule.fault_type}", self._fire, rule, exchange, wire, ticket, now, context="creating the fault"
        )
        if fired is not None:
            exchange.faults.append(fired.record)
        return fired, release

    def _fire(
        self, rule: CompiledRule, exchange: Exchange, wire: WireFormat | None, ticket: Ticket, now: float
    ) -> Fired:
        params = rule.config.fault
        if params is None:
            params = QuotaParams(retry_after_s=ticket.retry_after_s or 1)
        fault = rule.fault_cls(params)
        ctx = FaultContext(
            exchange=exchange,
            wire=wire,  # type: ignore[arg-type]
            rng=rng_for(self.ruleset.seed, rule.name, exchange.session, ticket.index),
            sleep=self.sleep,
            rule=rule.name,
        )
        ctx.rule_memory, ctx.now = rule.memory, now
        if ticket.session_state is not None:
            ctx.session_state = ticket.session_state
        if ticket.retry_after_s is not None:
            ctx.extra["quota_retry_after_s"] = ticket.retry_after_s
        record = FaultRecord(rule=rule.name, fault=rule.fault_type, params=fault.describe(), at=now)
        return Fired(rule=rule.name, type=rule.fault_type, fault=fault, ctx=ctx, record=record)

    def _record(
        self, ex: Exchange, rule: CompiledRule, outcome: str, reason: str, counter: int, index: int, now: float
    ) -> None:
        self.decisions.record(
            Decision(
                exchange_id=ex.id,
                session=ex.session,
                rule=rule.name,
                outcome=outcome,
                reason=reason,
                counter=counter,
                at=now,
                fault=rule.fault_type,
                index=index,
            )
        )

    # --- PlanHost: called back by plans ----------------------------------------------------

    def resolve_deferred(self, plan: Plan, rule: CompiledRule, tool: str) -> Fired | None:
        """Decide a response-stage rule now that the response calls `tool`."""
        ex = plan.exchange
        if ex is None:
            return None
        now = self.clock()
        if self.paused:
            self._record(ex, rule, SKIPPED_PAUSED, "engine paused", 0, 0, now)
            return None
        if self._shared and rule.counted:
            reason = f"response calls tool {tool!r} mid-stream, where the shared store cannot be awaited"
            self._record(ex, rule, SKIPPED_STATE_UNAVAILABLE, reason, 0, 0, now)
            return None
        fired, release = self._decide(rule, ex, plan.wire, now, tool)
        if release is not None:
            plan.releases.append(release)
        return fired

    def skip(self, plan: Plan, fired: Fired, reason: str) -> None:
        """A fault that fired could not act: off the exchange's injected faults, onto its skipped ones."""
        ex = plan.exchange
        if ex is None:
            return
        ex.faults[:] = [r for r in ex.faults if r is not fired.record]
        fired.record.params["skipped"] = reason
        ex.faults_skipped.append(fired.record)
        rule = next((r for r in self.rules if r.name == fired.rule), None)
        if rule is not None:
            self._record(ex, rule, SKIPPED_NOT_APPLICABLE, reason, 0, 0, self.clock())
        log.info("fault %s:%s did not apply to %s: %s", fired.rule, fired.type, ex.id, reason)

    def release(self, plan: Plan) -> None:
        """The exchange finished: free in-flight slots and count its tokens against quotas."""
        ex = plan.exchange
        tokens = 0
        if ex is not None:
            tokens = (ex.usage.input_tokens or 0) + (ex.usage.output_tokens or 0)
        now = self.clock()
        shared: list[Ticket] | None = None
        for _, ticket in plan.releases:
            if ticket.hold is None:
                Schedule.release(ticket, now, tokens)
            else:
                (shared := shared or []).append(ticket)
        if shared is not None:
            self._spawn(self.store.release(shared, now, tokens))
