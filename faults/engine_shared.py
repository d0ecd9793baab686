"""The fault engine's side of a shared schedule store (a fleet on Redis): one await per exchange.

From the first matching rule that needs counters on, `plan()` leaves the rules `pending` (config order
is kept) and the proxy awaits `settle(plan)`: one call to the store for all of them, whose answers
become decisions and faults exactly as a local decision would. Rules whose schedule is only a
probability are decided in the process, with no round trip. A counted response-stage rule on a
buffered body is decided by `resolve_deferred_shared` (the proxy awaits it before editing the body);
inside a stream (a synchronous callback that cannot await) it is skipped as `skipped_state_unavailable`.
Releases (in-flight leases, quota tokens) go to the store from a task: the exchange has ended, nobody
waits for them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.state.schedule import SKIPPED_PAUSED, Ask, ScheduleStore, Ticket
from brownout.faults.config import RuleConfig
from brownout.faults.plan import Fired, Plan

if TYPE_CHECKING:
    from brownout.faults.engine import CompiledRule, RuleSet
    from brownout.faults.schedule import Schedule

__all__ = ["SharedSchedules", "counters_key"]

log = logging.getLogger(__name__)


def counters_key(rule: RuleConfig) -> str:
    """The rule's key in a shared store: its name, and a tag of what its counters mean.

    A hot reload keeps a rule's counters unless its scope or quota changed (as in memory): those
    change the tag, so the reloaded rule counts on fresh keys."""
    q = rule.schedule.quota
    shape = json.dumps([rule.schedule.scope, None if q is None else q.model_dump()], sort_keys=True)
    return f"{rule.name}#{hashlib.sha1(shape.encode(), usedforsecurity=False).hexdigest()[:8]}"


class SharedSchedules:
    """Mixed into FaultEngine: what a shared schedule store decides."""

    store: ScheduleStore
    _shared: bool
    _tasks: set[asyncio.Task[None]]
    origin: float
    rules: list[CompiledRule]
    ruleset: RuleSet
    clock: Callable[[], float]
    guard: Guard
    paused: bool
    _decide: Callable[..., tuple[Fired | None, tuple[Schedule, Ticket] | None]]
    _record: Callable[..., None]

    @property
    def shared(self) -> bool:
        """Rules that need counters are decided by a shared store (await `settle` for a pending plan)."""
        return self._shared

    def use_store(self, store: ScheduleStore) -> None:
        """Decide counted rules with `store` from the next exchange on (the proxy's, once it runs)."""
        self.store = store
        self._shared = store.shared

    def set_origin(self, origin: float) -> None:
        """Time windows count from `origin` (the fleet's start) from now on."""
        self.origin = origin
        for rule in self.rules:
            rule.schedule.rebase(origin)

    def _ask(self, rule: CompiledRule, exchange: Exchange, now: float) -> Ask:
        schedule = rule.schedule
        return Ask(
            rule=rule.name,
            key=rule.key,
            spec=schedule.spec,
            seed=self.ruleset.seed,
            session=exchange.session,
            now=now,
            start=schedule.window_start(now),
            quota_base=schedule.base,
            lease=f"{exchange.id}\x1f{rule.name}",
            local=schedule.counters,
            session_ttl_s=self.ruleset.session_ttl_s,
            counts_tokens=rule.counts_tokens,
        )

    async def settle(self, plan: Plan) -> None:
        """Decide the plan's pending rules with one call to the store; their faults join the plan in order."""
        pending, plan.pending = plan.pending, None
        ex = plan.exchange
        if not pending or ex is None:
            return
        now = plan.at
        rules: list[CompiledRule] = pending
        tickets = await self.store.decide([self._ask(rule, ex, now) for rule in rules])
        for rule, ticket in zip(rules, tickets, strict=True):
            fired, release = self._decide(rule, ex, plan.wire, now, None, ticket)
            if release is not None:
                plan.releases.append(release)
            if fired is not None:
                plan.fired.append(fired)

    async def resolve_deferred_shared(self, plan: Plan, matches: list[tuple[Any, str]]) -> list[Fired]:
        """Decide response-stage rules whose tool a whole response calls, with one call to the store."""
        ex = plan.exchange
        if ex is None or not matches:
            return []
        now = self.clock()
        if self.paused:
            for rule, _ in matches:
                self._record(ex, rule, SKIPPED_PAUSED, "engine paused", 0, 0, now)
            return []
        tickets = await self.store.decide([self._ask(rule, ex, now) for rule, _ in matches])
        out: list[Fired] = []
        for (rule, tool), ticket in zip(matches, tickets, strict=True):
            fired, release = self._decide(rule, ex, plan.wire, now, tool, ticket)
            if release is not None:
                plan.releases.append(release)
            if fired is not None:
                out.append(fired)
        return out

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` (a store release) on the loop without waiting for it; contained by the guard."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous harness): nothing can await the store
            work.close()
            return
        task = loop.create_task(self._contained(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _contained(self, work: Awaitable[None]) -> None:
        await self.guard.acall("engine", lambda: work, context="releasing shared schedule state")

    async def drain(self) -> None:
        """Wait for the releases under way (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
