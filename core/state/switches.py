"""A fleet's switches and roll call in Redis: the kill switch, rule toggles, replicas and their config hash.

Switches live in one hash under the prefix (`switches`: `paused`, `rule:<name>`, and a `version`
bumped by every write; the version reads `<generation>:<count>`, the generation a random id given
when the hash is created, so that a store restarted empty never repeats a version a replica knew). Each replica reads it every `state.poll_interval_ms` with one small script
that answers the fields only when the version moved, and, once a second, registers itself in the
roll call (`replicas`: replica id -> config hash, paused flag, when last seen) and reads the fleet's
origin (`origin:<config hash>`, set once by the first replica running that config, kept alive by
every heartbeat). Writes are one script too: the fields and the version bump are atomic.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["EMPTY_VERSION", "FleetView", "RedisSwitches", "Replica"]

EMPTY_VERSION = ":0"  # the version of switches never written (or lost with the store's data)
ORIGIN_TTL_S = 300  # the whole fleet gone this long: the next one starts afresh (windows, counters)

_SYNC = """
local version = (redis.call('HGET', KEYS[1], 'gen') or '') .. ':' .. (redis.call('HGET', KEYS[1], 'version') or '0')
local fields = {}
if version ~= ARGV[1] then fields = redis.call('HGETALL', KEYS[1]) end
if ARGV[2] ~= '1' then return {version, fields} end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ttl = tonumber(ARGV[6])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. string.format('%.3f', now))
redis.call('EXPIRE', KEYS[2], math.ceil(ttl * 3))
redis.call('SET', KEYS[3], ARGV[7], 'NX')
redis.call('EXPIRE', KEYS[3], ARGV[8])
local origin = redis.call('GET', KEYS[3])
local roll = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local hash, paused, seen = string.match(all[i + 1], '^(%S+) (%S+) (%S+)$')
  if seen == nil or now - tonumber(seen) > ttl then
    redis.call('HDEL', KEYS[2], all[i])
  else
    roll[#roll + 1] = all[i]
    roll[#roll + 1] = hash
    roll[#roll + 1] = paused
    roll[#roll + 1] = string.format('%.3f', now - tonumber(seen))
  end
end
return {version, fields, origin, roll}
"""

_WRITE = """
local function version()
  return (redis.call('HGET', KEYS[1], 'gen') or '') .. ':' .. (redis.call('HGET', KEYS[1], 'version') or '0')
end
if ARGV[1] ~= '' and version() ~= ARGV[1] then
  return {version(), redis.call('HGETALL', KEYS[1]), 0}
end
redis.call('HSETNX', KEYS[1], 'gen', ARGV[2])
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('HINCRBY', KEYS[1], 'version', 1)
return {version(), redis.call('HGETALL', KEYS[1]), 1}
"""


@dataclass(frozen=True, slots=True)
class Replica:
    """One live replica in the roll call."""

    id: str
    config_hash: str
    paused: bool
    seen_s_ago: float


@dataclass(slots=True)
class FleetView:
    """What one read of the store says: the switches' version, their fields when it moved, the roll call."""

    version: str
    switches: dict[str, str] | None  # None: unchanged since the version the reader knew
    origin: str | None = None  # with a heartbeat: the fleet's origin (unix ms) for this config hash
    replicas: list[Replica] = field(default_factory=list)
    written: bool = False  # a write: whether it changed the switches


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _fields(flat: list[Any]) -> dict[str, str]:
    pairs = {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat) - 1, 2)}
    pairs.pop("version", None)
    pairs.pop("gen", None)
    return pairs


class RedisSwitches:
    """Reads and writes a fleet's switches and roll call, each in one script within the link's budget."""

    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self._sync = link.lua(_SYNC)
        self._write = link.script(_WRITE)

    async def read(
        self,
        known_version: str,
        *,
        heartbeat: tuple[str, str, bool, float, str] | None = None,
    ) -> FleetView | None:
        """The switches (fields only when the version moved), and with `heartbeat` (replica id, config
        hash, paused, roll-call TTL in s, origin to set when none is) the roll call and the origin.
        None when the store cannot be reached."""
        keys = [self.link.key("switches"), self.link.key("replicas"), ""]
        args: list[str | float] = [known_version, "0"]
        if heartbeat is not None:
            replica, config_hash, paused, ttl_s, origin = heartbeat
            keys[2] = self.link.key("origin", config_hash)
            args = [known_version, "1", replica, config_hash, "1" if paused else "0", ttl_s, origin, ORIGIN_TTL_S]
        else:
            keys[2] = self.link.key("origin")
        # A poll: it may wait for an exchange's write to go out with it.
        got = await self.link.eval("switches", self._sync, keys, args, None, linger=True)
        if got is None:
            return None
        version = _text(got[0])
        view = FleetView(version, _fields(got[1]) if got[1] else None)
        if len(got) > 2:
            view.origin = _text(got[2]) if got[2] is not None else None
            roll = got[3]
            view.replicas = [
                Replica(_text(roll[i]), _text(roll[i + 1]), _text(roll[i + 2]) == "1", float(_text(roll[i + 3])))
                for i in range(0, len(roll) - 3, 4)
            ]
        return view

    async def write(self, fields: dict[str, str], *, if_version: str = "") -> FleetView | None:
        """Set switch fields and bump the version atomically (with `if_version`: only if the switches are
        still at that version); the switches after it (`written` says whether this wrote them), or None
        when the store cannot be reached."""
        args: list[str] = [if_version, os.urandom(4).hex(), *(x for item in fields.items() for x in item)]
        keys = [self.link.key("switches")]
        got = await self.link.call("switch", lambda r: self._write(keys=keys, args=args), None)
        if got is None:
            return None
        return FleetView(_text(got[0]), _fields(got[1]), written=bool(got[2]))
