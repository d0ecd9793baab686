"""The Redis schedule store: a fleet's rule counters, decided by one Lua script per exchange.

Every counted rule that matched an exchange is decided in one round trip (schedule_redis.lua): the
same checks, in the same order, as the memory store, and the same draw (`redis.sha1hex`), so a fleet
takes the decisions one process would take for the same traffic in the same order. A rule whose
schedule is only a probability needs no counter: it is decided in the process, on its own counters,
and keeps working while the store is away.

Keys (under `state.key_prefix`): `e:<epoch>:r:<rule key>` for the rule, `...:s:<session>` for one of
its sessions, with `:n` (matches), `:i` (injections), `:l` (max_concurrent leases, a sorted set scored
by expiry) and `:q:<window start>` (quota requests and tokens). The epoch is the fleet's origin (see
proxy/fleet.py): a fleet started afresh counts afresh, as a restarted process does. Session keys
expire after the session TTL, rule keys after a day without a match, leases after `lease_ttl_s`
unless the replica that holds them renews them (a dead replica frees its slots within the TTL).

The store away (unreachable, slow, restarted, origin not known yet): counted rules are skipped with
`skipped_state_unavailable`; each failed call is counted by the link.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from brownout.core.state.link import RedisLink
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

__all__ = ["RULE_TTL_S", "RedisSchedules"]

RULE_TTL_S = 86_400  # a rule-wide key no replica touched for a day is gone
QUOTA_TTL_S = 120
_SESSION_KEY_MAX = 64  # longer session ids are keyed by their sha1 (the draw still uses the id itself)
_SCRIPT = resources.files("brownout.core.state").joinpath("schedule_redis.lua").read_text()
_DRAW_SCALE = float(1 << 52)


def _bytes(text: str) -> bytes:
    # Session ids come from the client: encoded as the draw encodes them, never failing on odd text.
    return text.encode("utf-8", "surrogatepass")


def _opt(value: int | None) -> bytes:
    return b"" if value is None else str(value).encode()


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
    """The redis ScheduleStore: counted rules decided together in one Lua script per exchange."""

    shared = True

    def __init__(self, link: RedisLink, *, lease_ttl_s: float, replica: str = "") -> None:
        self.link = link
        self.lease_ttl_s = lease_ttl_s
        self.replica = replica  # makes lease ids unique across replicas
        self.epoch: str | None = None  # the fleet's origin: set once known (proxy/fleet.py)
        self._script = link.script(_SCRIPT)
        self._held: dict[str, set[bytes]] = {}  # leases this replica holds: renewed until released

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
        counted = [a for a in asks if a.spec.counted]
        replies: list[int] | None = None
        if counted and self.epoch is not None:
            args: list[bytes | str | float] = [repr(asks[0].now), repr(float(self.lease_ttl_s)), RULE_TTL_S]
            for a in counted:
                args.extend(self._args(a))
            replies = await self.link.call("schedule", lambda r: self._script(args=args), None)
        tickets: list[Ticket] = []
        j = 0
        for a in asks:
            if not a.spec.counted:
                tickets.append(a.local.decide(a.session, a.now, a.start))
            elif replies is None:
                why = "the fleet's origin is not known yet" if self.epoch is None else "the shared store is unreachable"
                tickets.append(Ticket(SKIPPED_STATE_UNAVAILABLE, why, 0, 0))
            else:
                code, n, index, detail = (int(v) for v in replies[j : j + 4])
                j += 4
                ticket = self._ticket(a, code, n, index, detail)
                # This replica's share, for its /status (the fleet's totals are the store's).
                a.local.total.matches += 1
                a.local.total.injections += ticket.outcome == FIRED
                tickets.append(ticket)
        return tickets

    def _args(self, a: Ask) -> list[bytes | str | float]:
        s = a.spec
        rbase = self.base_key(a)
        bucket = quota_window(a.quota_base, a.now) if s.has_quota else 0.0
        p = 1.0 if a.start is None else ramped(s, a.now, a.start)
        return [
            rbase,
            self.session_key(rbase, a.session),
            max(1, math.ceil(a.session_ttl_s)),
            a.rule,
            _bytes(a.session),
            str(a.seed),
            b"1" if s.per_session else b"0",
            b"0" if a.start is None else b"1",
            str(s.after),
            _opt(s.first),
            _opt(s.every),
            _opt(s.max_injections),
            _opt(s.max_concurrent),
            _opt(s.requests_per_min),
            _opt(s.tokens_per_min),
            repr(bucket),
            repr(p),
            self._lease_id(a),
        ]

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

        async def run(r: Any) -> Any:
            pipe = r.pipeline(transaction=False)
            for h in holds:
                if h.leases is not None:
                    pipe.zrem(h.leases, h.lease)
                if h.quota is not None and tokens > 0:
                    qkey = f"{h.quota}:q:{quota_window(h.quota_base, now)!r}"
                    pipe.hincrby(qkey, "t", tokens)
                    pipe.expire(qkey, QUOTA_TTL_S)
            return await pipe.execute()

        await self.link.call("release", run, None)

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
