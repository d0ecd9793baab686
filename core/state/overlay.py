"""An experiment phase laid over a fleet's rules, held in the shared store by a lease.

One hash per fleet, `experiment` under the prefix: `owner` (the run of the experiment that holds the
fleet), `id` (the phase being applied: a new id per phase), `body` (the phase as JSON: experiment,
phase, rules, lease) and `ack:<replica>` for each replica that applied it (or rejected it). The key
expires with the lease (`PEXPIRE`): the runner renews it well within the lease; a runner that dies lets
it expire, and every replica drops the phase at its next poll, or at the lease's end by its own clock
while the store is away. Chaos never outlives its runner by more than the lease.

Every write is one script (atomic): a runner never overwrites another run's phase, and a replica's
acknowledgement never recreates a key that expired.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["EMPTY", "OverlayRecord", "OverlayWrite", "RedisOverlay", "RollCall"]

log = logging.getLogger(__name__)

ACK_MAX = 300  # characters of an acknowledgement kept (a rejection carries its reason)

_READ = """
local id = redis.call('HGET', KEYS[1], 'id')
if not id then return {} end
local ack = ARGV[3]
if ARGV[2] ~= '' and string.sub(ack, 1, string.len(id) + 1) == id .. ' ' then
  redis.call('HSET', KEYS[1], 'ack:' .. ARGV[2], ack)
end
local ttl = redis.call('PTTL', KEYS[1])
if id == ARGV[1] then return {id, ttl} end
return {id, ttl, redis.call('HGET', KEYS[1], 'body')}
"""

_PUT = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and owner ~= ARGV[1] then return {0, owner, redis.call('HGET', KEYS[1], 'body') or ''} end
if owner and redis.call('HGET', KEYS[1], 'id') == ARGV[2] then
  redis.call('PEXPIRE', KEYS[1], ARGV[4])  -- the same phase again: a renewal, its acks kept
  return {1}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'id', ARGV[2], 'body', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1}
"""

_RENEW = """
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

_CLEAR = """
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return 0 end
if ARGV[1] ~= '' and owner ~= ARGV[1] then return -1 end
return redis.call('DEL', KEYS[1])
"""

_ROLL = """
local t = redis.call('TIME')
return {t[1] .. '.' .. string.format('%06d', tonumber(t[2])), redis.call('HGETALL', KEYS[1]),
        redis.call('HGETALL', KEYS[2])}
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class OverlayRecord:
    """What one read found: the phase's id ("" when none is applied), the lease left, its body when new."""

    id: str
    ttl_ms: int
    body: str | None = None  # None: the reader already knows this id


EMPTY = OverlayRecord("", 0)


@dataclass(frozen=True, slots=True)
class OverlayWrite:
    """A runner's write: whether it holds the fleet, and the holder and phase when another run does."""

    ok: bool
    owner: str = ""
    body: str = ""


@dataclass(frozen=True, slots=True)
class RollCall:
    """The replicas the store knows (id -> seconds since last seen) and their acknowledgements of the phase."""

    seen_s_ago: dict[str, float]
    paused: dict[str, bool]
    acks: dict[str, str]


class RedisOverlay:
    """Reads and writes a fleet's experiment phase, each in one script within the link's budget."""

    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.key = link.key("experiment")
        self._read = link.lua(_READ)
        self._put = link.script(_PUT)
        self._renew = link.script(_RENEW)
        self._clear = link.script(_CLEAR)
        self._roll = link.script(_ROLL)

    async def read(self, known_id: str, *, replica: str = "", ack: str = "") -> OverlayRecord | None:
        """The phase applied to the fleet (its body only when its id is not `known_id`), EMPTY when none;
        None when the store cannot be reached. With `replica`, `ack` ("<id> ok" or "<id> rejected: why")
        is recorded for the phase it names, if that is still the one applied."""
        args = [known_id, replica, ack[:ACK_MAX]]
        # A poll: it may wait for an exchange's write to go out with it.
        got = await self.link.eval("experiment", self._read, [self.key], args, None, linger=True)
        if got is None:
            return None
        if not got:
            return EMPTY
        body = _text(got[2]) if len(got) > 2 and got[2] is not None else None
        return OverlayRecord(_text(got[0]), int(got[1]), body)

    async def put(self, owner: str, phase_id: str, body: str, lease_ms: int) -> OverlayWrite | None:
        """Apply a phase for `lease_ms` unless another run holds the fleet (the phase already applied: renew
        it); None when the store is away."""
        args: list[str | int] = [owner, phase_id, body, max(1, lease_ms)]
        got = await self.link.call("experiment", lambda r: self._put(keys=[self.key], args=args), None)
        if got is None:
            return None
        if int(got[0]) == 1:
            return OverlayWrite(True)
        return OverlayWrite(False, _text(got[1]), _text(got[2]))

    async def renew(self, owner: str, lease_ms: int) -> bool | None:
        """Extend `owner`'s lease; False when it holds none any more (expired, or removed by someone)."""
        args: list[str | int] = [owner, max(1, lease_ms)]
        got = await self.link.call("experiment", lambda r: self._renew(keys=[self.key], args=args), None)
        return None if got is None else bool(got)

    async def clear(self, owner: str = "") -> int | None:
        """Remove the phase (only `owner`'s, when given): 1 removed, 0 none was applied, -1 another run's."""
        got = await self.link.call("experiment", lambda r: self._clear(keys=[self.key], args=[owner]), None)
        return None if got is None else int(got)

    async def roll_call(self) -> RollCall | None:
        """The fleet's replicas as their heartbeats left them, and the acknowledgements of the phase."""
        keys = [self.link.key("replicas"), self.key]
        got = await self.link.call("experiment", lambda r: self._roll(keys=keys, args=[]), None)
        if got is None:
            return None
        now = float(_text(got[0]))
        seen: dict[str, float] = {}
        paused: dict[str, bool] = {}
        roll = [_text(x) for x in got[1]]
        for replica, value in zip(roll[::2], roll[1::2], strict=True):
            parts = value.split(" ")
            if len(parts) == 3:
                seen[replica] = max(0.0, now - float(parts[2]))
                paused[replica] = parts[1] == "1"
        fields = [_text(x) for x in got[2]]
        acks = {k[4:]: v for k, v in zip(fields[::2], fields[1::2], strict=True) if k.startswith("ack:")}
        return RollCall(seen, paused, acks)
