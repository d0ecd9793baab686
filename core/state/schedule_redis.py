"""The Redis schedule store: a fleet's rule counters, decided by one Lua script per exchange.

Every rule that matched an exchange is decided in one round trip (schedule_redis.lua): the same
checks, in the same order, as the memory store, and the same draw (`redis.sha1hex`), so a fleet takes
the decisions one process would take for the same traffic in the same order. That includes a rule
whose schedule is only a probability: the session's match index that keys its draw (and its fault's
RNG) is counted in the store, so a session gets the same faults whichever replica serves each of its
requests. Such a rule needs no counter to decide, so while the store is away it is decided in the
process, on the session index the process last had from the store (or counted itself).

Keys (under `state.key_prefix`): `e:<epoch>:r:<rule key>` for the rule, `...:s:<session>` for one of
its sessions, with `:n` (matches), `:i` (injections), `:l` (max_concurrent leases, a sorted set scored
by expiry) and `:q:<window start>` (quota requests and tokens). The epoch is the fleet's origin (see
proxy/fleet.py): a fleet started afresh counts afresh, as a restarted process does. Session keys
expire after the session TTL, rule keys after a day without a match, leases after `lease_ttl_s`
unless the replica that holds them renews them (a dead replica frees its slots within the TTL).

The store away (unreachable, slow, restarted, origin not known yet): counted rules are skipped with
`skipped_state_unavailable`, probability-only ones decided in the process; each failed call is counted
by the link.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from brownout.core.state.schedule import (
    FIRED,
    SKIPPED_BLAST_RADIUS,
    SKIPPED_PROBABILITY,
    SKIPPED_SCHEDULE,
    SKIPPED_STATE_UNAVAILABLE,
    Ask,
    Ticket,
    ramped,
)
from brownout.core.state.schedule_memory import WINDOW_S

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["RULE_TTL_S", "RedisSchedules"]

RULE_TTL_S = 86_400  # a rule-wide key no replica touched for a day is gone
QUOTA_TTL_S = 120
_SESSION_KEY_MAX = 64  # longer session ids are keyed by their sha1 (the draw still uses the id itself)
_RULE_ARGS_MAX = 4096
_SCRIPT = resources.files("brownout.core.state").joinpath("schedule_redis.lua").read_text()
_DRAW_SCALE = float(1 << 52)


def _bytes(text: str) -> bytes:
    # Session ids come from the client: encoded as the draw encodes them, never failing on odd text.
    return text.encode("utf-8", "surrogatepass")


def quota_window(base: float, now: float) -> float:
    """Start of the 60 s quota window containing `now`, counted from `base`."""
    return base + math.floor((now - base) / WINDOW_S) * WINDOW_S


@dataclass(slots=True)
class Hold:
    """What a fired or quota-admitted ticket leaves in the store until its exchange ends."""

    leases: str | None  # the sorted set holding the lease ...
    lease: bytes  # ... and its member
    quota: str | None  # the scope's base key, when tokens go to its quota window at release
    quota_base: float


class RedisSchedules:
    """The redis ScheduleStore: an exchange's matched rules decided together in one Lua script."""

    shared = True

    def __init__(self, link: RedisLink, *, lease_ttl_s: float, replica: str = "") -> None:
        self.link = link
        self.lease_ttl_s = lease_ttl_s
        self.replica = replica  # makes lease ids unique across replicas
        self.epoch: str | None = None  # the fleet's origin: set once known (proxy/fleet.py)
        self._script = link.lua(_SCRIPT)
        self._held: dict[str, set[bytes]] = {}  # leases this replica holds: renewed until released
        self._rule_args: dict[tuple[Any, ...], bytes] = {}

    async def load(self) -> bool:
        """Load the script into the server ahead of the first exchange (which then costs one round trip)."""
        return await self.link.call("load", lambda r: r.script_load(_SCRIPT), None) is not None

    def base_key(self, ask: Ask) -> str:
        return self.link.key("e", self.epoch or "", "r", ask.key)

    @staticmethod
    def session_key(rule_base: str, session: str) -> str:
        raw = _bytes(session)
        sk = hashlib.sha1(raw, usedforsecurity=False).hexdigest() if len(raw) > _SESSION_KEY_MAX else session
        return f"{rule_base}:s:{sk}"

    async def decide(self, asks: Sequence[Ask]) -> list[Ticket]:
        replies: list[int] | None = None
        if asks and self.epoch is not None:
            args: list[bytes | str | float] = [repr(asks[0].now), repr(float(self.lease_ttl_s)), RULE_TTL_S]
            for a in asks:
                args.extend(self._args(a))
            replies = await self.link.eval("schedule", self._script, [], args, None)
        tickets: list[Ticket] = []
        for j, a in enumerate(asks):
            if replies is not None:
                code, n, index, detail = (int(v) for v in replies[4 * j : 4 * j + 4])
                ticket = self._ticket(a, code, n, index, detail)
                a.local.follow(a.session, a.now, index, ticket.outcome == FIRED)
            elif not a.spec.counted:
                # Probability-only: the draw needs no counter, so it goes on, on this process's session index.
                ticket = a.local.decide(a.session, a.now, a.start)
            else:
                why = "the fleet's origin is not known yet" if self.epoch is None else "the shared store is unreachable"
                ticket = Ticket(SKIPPED_STATE_UNAVAILABLE, why, 0, 0)
            tickets.append(ticket)
        return tickets

    def _args(self, a: Ask) -> list[bytes | str | float]:
        s = a.spec
        p = b"" if a.start is None else repr(ramped(s, a.now, a.start))
        bucket = repr(quota_window(a.quota_base, a.now)) if s.has_quota else b""
        lease = self._lease_id(a) if s.max_concurrent is not None else b""
        return [self._rule_arg(a), _bytes(a.session), p, bucket, lease]

    def _rule_arg(self, a: Ask) -> bytes:
        """What the script needs of the rule, encoded once per rule (and epoch): an exchange sends few arguments."""
        cache_key = (self.epoch, a.key, a.rule, a.seed, a.spec, a.session_ttl_s)
        arg = self._rule_args.get(cache_key)
        if arg is None:
            if len(self._rule_args) >= _RULE_ARGS_MAX:  # hot reloads leave old ones behind
                self._rule_args.clear()
            s = a.spec
            fields = [
                self.base_key(a), max(1, math.ceil(a.session_ttl_s)), a.rule, str(a.seed), s.per_session, s.after,
                s.first, s.every, s.max_injections, s.max_concurrent, s.requests_per_min, s.tokens_per_min,
            ]  # fmt: skip
            # Lua's cjson reads null as a value that is true: a missing field is false.
            text = json.dumps([False if f is None else f for f in fields], ensure_ascii=False)
            arg = self._rule_args[cache_key] = text.encode("utf-8", "surrogatepass")
        return arg

    def _lease_id(self, a: Ask) -> bytes:
        return _bytes(f"{self.replica}\x1f{a.lease}")

    def _ticket(self, a: Ask, code: int, n: int, index: int, detail: int) -> Ticket:
        s = a.spec
        if code == 1:
            return Ticket(SKIPPED_SCHEDULE, "outside the time window", n, index)
        rbase = self.base_key(a)
        scope = self.session_key(rbase, a.session) if s.per_session else rbase
        quota = scope if s.has_quota and a.counts_tokens else None
        hold = Hold(None, b"", quota, a.quota_base) if quota is not None else None
        if code == 2:
            return Ticket(SKIPPED_SCHEDULE, f"quota: {detail} requests this minute", n, index, hold=hold)
        if code != 0:
            return Ticket(*self._skipped(a, code, n, detail), n, index, hold=hold)
        assert a.start is not None  # fired: the window was open
        p = ramped(s, a.now, a.start)
        retry: int | None = None
        if detail == 1:
            retry = max(1, math.ceil(quota_window(a.quota_base, a.now) + WINDOW_S - a.now))
        if s.max_concurrent is not None:
            hold = Hold(f"{scope}:l", self._lease_id(a), quota, a.quota_base)
            self._held.setdefault(hold.leases or "", set()).add(hold.lease)
        reason = "quota exceeded" if retry is not None else (f"p {p:.6f}" if p < 1.0 else "always")
        state = a.local.session_state(a.session, a.now)
        return Ticket(FIRED, reason, n, index, retry_after_s=retry, session_state=state, hold=hold)

    @staticmethod
    def _skipped(a: Ask, code: int, n: int, detail: int) -> tuple[str, str]:
        s = a.spec
        if code == 3:
            return SKIPPED_SCHEDULE, f"after: match {n} of {s.after} skipped"
        if code == 4:
            return SKIPPED_SCHEDULE, f"first: match {detail} > {s.first}"
        if code == 5:
            return SKIPPED_SCHEDULE, f"every: match {detail} not a multiple of {s.every}"
        if code == 6:
            return SKIPPED_BLAST_RADIUS, f"max_injections {s.max_injections} reached"
        if code == 7:
            return SKIPPED_BLAST_RADIUS, f"max_concurrent {s.max_concurrent} in flight"
        assert a.start is not None
        return SKIPPED_PROBABILITY, f"draw {detail / _DRAW_SCALE:.6f} >= p {ramped(s, a.now, a.start):.6f}"

    async def release(self, tickets: Sequence[Ticket], now: float, tokens: int) -> None:
        holds = [t.hold for t in tickets if isinstance(t.hold, Hold)]
        for t in tickets:
            t.hold = None
        if not holds:
            return
        for h in holds:
            if h.leases is not None:
                held = self._held.get(h.leases)
                if held is not None:
                    held.discard(h.lease)
                    if not held:
                        del self._held[h.leases]
        if not any(h.leases is not None or (h.quota is not None and tokens > 0) for h in holds):
            return

        commands: list[tuple[Any, ...]] = []
        for h in holds:
            if h.leases is not None:
                commands.append(("ZREM", h.leases, h.lease))
            if h.quota is not None and tokens > 0:
                qkey = f"{h.quota}:q:{quota_window(h.quota_base, now)!r}"
                commands += [("HINCRBY", qkey, "t", tokens), ("EXPIRE", qkey, QUOTA_TTL_S)]
        await self.link.run("release", commands, None)

    async def renew(self, now: float) -> None:
        """Push back the expiry of every lease this replica still holds (its exchanges are in flight)."""
        if not self._held:
            return
        expiry = now + self.lease_ttl_s
        held = {k: list(v) for k, v in self._held.items()}

        async def run(r: Any) -> Any:
            pipe = r.pipeline(transaction=False)
            for key, members in held.items():
                pipe.zadd(key, dict.fromkeys(members, expiry), xx=True)
                pipe.expire(key, math.ceil(self.lease_ttl_s) + 1)
            return await pipe.execute()

        await self.link.call("renew", run, None)

    async def counters(self, rules: Sequence[tuple[str, str]], now: float) -> dict[str, dict[str, int]] | None:
        """The fleet's counters of these (name, key) rules for /status; None when the store is away."""
        if self.epoch is None or not rules:
            return None

        async def run(r: Any) -> Any:
            pipe = r.pipeline(transaction=False)
            for _, key in rules:
                base = self.link.key("e", self.epoch or "", "r", key)
                pipe.get(f"{base}:n")
                pipe.get(f"{base}:i")
                pipe.zcount(f"{base}:l", now, "+inf")
            return await pipe.execute()

        got = await self.link.call("status", run, None)
        if got is None:
            return None
        out: dict[str, dict[str, int]] = {}
        for i, (name, _) in enumerate(rules):
            matches, injections, leases = got[3 * i : 3 * i + 3]
            out[name] = {"matches": int(matches or 0), "injections": int(injections or 0), "leases": int(leases)}
        return out

    def describe(self) -> dict[str, Any]:
        return {**self.link.describe(), "epoch": self.epoch, "leases_held": sum(len(v) for v in self._held.values())}
