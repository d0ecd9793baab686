"""The fleet's sessions in Redis: one hash per session, an index by last activity, Lua for every change.

Keys under the link's prefix:
- `session:<id>`: a hash. `v` the version, `n` how many history entries were ever appended,
  `f:<name>` the caller's JSON blobs, `h:<i>` the history as a ring of `history_max` slots.
- `sessions`: a sorted set of session ids scored by last activity (seconds since the epoch, the
  committing replica's clock; a score never moves back).

Every read-modify-write is one script, so no other client's command runs in between. A commit
checks the version, applies the change, raises the version, marks the session active, and pops
the least recently active sessions over `max_sessions` (their data goes back to the committer,
which closes them). A conflict answers with the record as it is now, saving a round trip.
Session end: `claim_idle` takes the sessions idle for `idle_s` off the index and deletes them in
one script, so two replicas sweeping at once never close the same session twice.

A session's keys expire after `2 * idle_s` without a commit: the first `idle_s` it is open, the
second leaves any replica time to claim and close it; if none does (the whole fleet was down),
it expires unjudged. The scripts name keys they build from the prefix, so they need one Redis
server (standalone, or a primary with replicas), not Redis Cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from brownout.core.state.sessions import Committed, SessionChange, SessionRecord, Status, check_bounds

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["RedisSessions"]

# ARGV: expected version, now, key ttl (ms), max_sessions, history_max, session id, session key prefix,
# then: n fields, name/value pairs; n dropped, names; n appended, entries.
_COMMIT = """
local h, index = KEYS[1], KEYS[2]
local v = tonumber(redis.call('HGET', h, 'v') or '0')
if v ~= tonumber(ARGV[1]) then return {0, redis.call('HGETALL', h), {}} end
local i = 8
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HSET', h, 'f:' .. ARGV[i], ARGV[i + 1]); i = i + 2 end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do redis.call('HDEL', h, 'f:' .. ARGV[i]); i = i + 1 end
n = tonumber(ARGV[i]); i = i + 1
local slots = tonumber(ARGV[5])
for _ = 1, n do
  local count = redis.call('HINCRBY', h, 'n', 1)
  redis.call('HSET', h, 'h:' .. ((count - 1) % slots), ARGV[i]); i = i + 1
end
local version = redis.call('HINCRBY', h, 'v', 1)
redis.call('PEXPIRE', h, ARGV[3])
local id, now = ARGV[6], tonumber(ARGV[2])
local seen = redis.call('ZSCORE', index, id)
if not seen or tonumber(seen) < now then redis.call('ZADD', index, now, id) end
redis.call('PEXPIRE', index, ARGV[3])
local evicted = {}
local over = redis.call('ZCARD', index) - tonumber(ARGV[4])
if over > 0 then
  for _, old in ipairs(redis.call('ZRANGE', index, 0, over)) do
    if over > 0 and old ~= id then
      over = over - 1
      redis.call('ZREM', index, old)
      local key = ARGV[7] .. old
      table.insert(evicted, old)
      table.insert(evicted, redis.call('HGETALL', key))
      redis.call('DEL', key)
    end
  end
end
return {version, {}, evicted}
"""

# ARGV: cutoff (idle since at most), limit, session key prefix.
_CLAIM = """
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[3] .. id
  local data = redis.call('HGETALL', key)
  redis.call('DEL', key)
  if #data > 0 then table.insert(out, id); table.insert(out, data) end
end
return out
"""


class RedisSessions:
    """SessionStates on Redis, through the proxy's link (every call budgeted, failures counted)."""

    def __init__(
        self, link: RedisLink, *, idle_s: float = 300.0, max_sessions: int = 10_000, history_max: int = 32
    ) -> None:
        check_bounds(idle_s, max_sessions, history_max)
        self.link = link
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self.history_max = history_max
        self._ttl_ms = max(1, round(2 * idle_s * 1000))
        self._session_prefix = link.key("session", "")
        self._index = link.key("sessions")
        self._commit = link.lua(_COMMIT)
        self._claim = link.script(_CLAIM)

    def _key(self, session_id: str) -> str:
        return self._session_prefix + session_id

    async def load(self, session_id: str) -> SessionRecord | Status:
        key = self._key(session_id)
        # One command: atomic. After the response (the checks' job): it may wait for the next exchange's write.
        got = await self.link.run("session_load", [("HGETALL", key)], None, linger=True)
        if got is None:
            return Status.UNAVAILABLE
        reply = got[0]  # a map (RESP3) or a flat list (RESP2)
        flat = [item for pair in reply.items() for item in pair] if isinstance(reply, dict) else reply
        return self._record(session_id, flat, self.history_max)

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        args: list[Any] = [
            record.version, repr(float(now)), self._ttl_ms, self.max_sessions, self.history_max, record.id,
            self._session_prefix, len(change.fields),
        ]  # fmt: skip
        for name, value in change.fields.items():
            args += [name, value]
        args += [len(change.dropped), *change.dropped, len(change.appended), *change.appended]
        keys = [self._key(record.id), self._index]
        reply = await self.link.eval("session_commit", self._commit, keys, args, None, linger=True)
        if reply is None:
            return Status.UNAVAILABLE
        version, current, evicted = reply
        pairs = zip(evicted[::2], evicted[1::2], strict=True)
        gone = [self._record(_text(old), data, self.history_max) for old, data in pairs]
        if version == 0:
            return Committed(None, self._record(record.id, current, self.history_max), gone)
        return Committed(int(version), evicted=gone)

    async def claim_idle(self, now: float, limit: int = 100) -> list[SessionRecord] | Status:
        args: list[str | int] = [repr(float(now - self.idle_s)), limit, self._session_prefix]
        reply = await self.link.call("session_claim", lambda r: self._claim(keys=[self._index], args=args), None)
        if reply is None:
            return Status.UNAVAILABLE
        return [self._record(_text(i), data, self.history_max) for i, data in zip(reply[::2], reply[1::2], strict=True)]

    @staticmethod
    def _record(session_id: str, flat: Sequence[bytes | str], history_max: int) -> SessionRecord:
        """A record from a hash's HGETALL (empty: version 0)."""
        raw = {_text(k): _text(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}
        record = SessionRecord(session_id, int(raw.get("v", 0)))
        appended = int(raw.get("n", 0))
        for i in range(max(0, appended - history_max), appended):
            entry = raw.get(f"h:{i % history_max}")
            if entry is not None:
                record.history.append(entry)
        record.fields = {k[2:]: v for k, v in raw.items() if k.startswith("f:")}
        return record


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
