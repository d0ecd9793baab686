"""One process's connection to the shared Redis store: budgeted calls, counted failures, a breaker.

Traffic first: a call that fails or outlasts its budget (`state.timeout_ms`, 50 ms by default)
is counted (`on_error(op)`, exported as `brownout_state_errors_total{op}`) and answered with the
caller's fallback; nothing is raised. Once a call fails the link is *down*: later calls get their
fallback at once (and are counted) instead of each waiting out the budget on a dead server, while
one background probe (`PING`) tries again after a backoff (0.25 s doubling to 4 s). The first
probe that succeeds brings the link back up; redis-py opens a fresh connection by itself.

Connections come from a bounded pool (`state.max_connections`): a call that finds them all busy
waits for one, and that wait is part of its budget. The hot calls (an exchange's decision, its
session's read and commit, its releases) go through `run`/`eval`: the commands issued in one turn of
the loop leave in one write (core/state/batch.py), each caller still answered on its own.

Every call runs on the event loop of the proxy that owns the link (redis-py's asyncio client ties
its connections to one loop): one link per proxy, never shared between two.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from brownout.core.state.batch import Batcher, Command, Lua
from brownout.core.state.config import StateConfig
from brownout.core.state.deadline import within

__all__ = ["RedisLink"]

log = logging.getLogger(__name__)
T = TypeVar("T")
D = TypeVar("D")


def _no_maintenance_notifications() -> dict[str, Any]:
    """redis-py's maintenance notifications off, not "auto" (redis-py 8's default).
    With them on, the pool never checks a pooled connection for EOF before handing it out, so after Redis
    restarts the first calls meet "Connection closed by server" and mark the store down again. They are a
    managed-Redis feature brownout does not use; an older redis-py has nothing to turn off."""
    try:
        from redis.maint_notifications import MaintNotificationsConfig
    except ImportError:
        return {}
    return {"maint_notifications_config": MaintNotificationsConfig(enabled=False)}


BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 4.0


class RedisLink:
    """Redis calls for one proxy: each within its budget, a failure counted and answered by a fallback."""

    def __init__(
        self,
        config: StateConfig,
        *,
        on_error: Callable[[str], None] | None = None,
        on_up: Callable[[bool], None] | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        url = config.resolve_url(environ)
        if url is None:
            raise ValueError(f"state.url: no Redis URL (set state.url or {config.url_env})")
        self.config = config
        self.where = config.display_url(environ)
        self.prefix = config.key_prefix
        self.timeout_s = config.timeout_ms / 1000
        self._on_error = on_error
        self._on_up = on_up
        self._clock = clock
        # No retries inside redis-py: the budget is the caller's, and the breaker decides when to try again.
        # A bounded pool: a burst of exchanges shares a few connections (waiting for one within the call's
        # budget) instead of opening one each, every new one paying a connect and a handshake on the
        # request path, and a fleet of processes cannot run Redis out of clients or itself out of sockets.
        pool = aioredis.BlockingConnectionPool.from_url(
            url,
            max_connections=config.max_connections,
            timeout=self.timeout_s,
            socket_timeout=None,  # every call is within its budget already (a second timer per read costs)
            socket_connect_timeout=config.connect_timeout_ms / 1000,
            retry=Retry(NoBackoff(), 0),
            decode_responses=False,
            **_no_maintenance_notifications(),
        )
        self.client: aioredis.Redis = aioredis.Redis.from_pool(pool)
        self.batches = Batcher(pool, self.timeout_s)
        self.up: bool | None = None  # unknown until the first call
        self.errors = 0
        self._backoff_s = BACKOFF_FIRST_S
        self._retry_at = 0.0
        self._probe: asyncio.Task[None] | None = None

    def key(self, *parts: str | int) -> str:
        """A key under this fleet's prefix: `key("rule", name, "matches")` -> `brownout:rule:NAME:matches`."""
        return self.prefix + ":".join(str(p) for p in parts)

    def script(self, source: str) -> AsyncScript:
        """A server-side Lua script (atomic: no other client's command runs in between), loaded on first use."""
        return self.client.register_script(source)

    def lua(self, source: str) -> Lua:
        """A server-side Lua script for `eval` (atomic: no other client's command runs in between)."""
        return self.batches.lua(source)

    async def eval(
        self, op: str, script: Lua, keys: list[Any], args: list[Any], default: D, *, linger: bool = False
    ) -> Any | D:
        """The script's reply, batched with the other calls of this turn (see `run`)."""
        got = await self.run(op, [script.command(keys, args)], None, linger=linger)
        return default if got is None else got[0]

    async def run(self, op: str, commands: list[Command], default: D, *, linger: bool = False) -> list[Any] | D:
        """The commands' replies, sent in one write with the other calls of this turn of the loop, within the
        budget; on failure (an error reply too), or while the store is down, count it and return `default`.
        `linger`: nobody waits on the answer before answering the agent, so it may wait for the next write."""
        if self.up is False and not self._try_again():
            self._count(op)
            return default
        try:
            replies = await self.batches.submit(commands, linger=linger)
            error = next((r for r in replies if isinstance(r, RedisError)), None)
            if error is not None:
                raise error
        except (RedisError, OSError, TimeoutError) as e:
            self._failed(op, e)
            return default
        self._mark_up()
        return replies

    async def call(self, op: str, fn: Callable[[aioredis.Redis], Awaitable[T]], default: D) -> T | D:
        """`await fn(client)` within the budget; on failure (or while the store is down) count it and return `default`."""
        if self.up is False and not self._try_again():
            self._count(op)
            return default
        try:
            result = await within(fn(self.client), self.timeout_s)
        except (RedisError, OSError, TimeoutError) as e:
            self._failed(op, e)
            return default
        self._mark_up()
        return result

    def _try_again(self) -> bool:
        # Down: answer from the fallback at once, and let one background probe find out when it is back.
        if self._probe is None and self._clock() >= self._retry_at:
            self._probe = asyncio.get_running_loop().create_task(self._ping())
        return False

    async def _ping(self) -> None:
        try:
            await within(self.client.ping(), self.config.connect_timeout_ms / 1000 + self.timeout_s)
        except (RedisError, OSError, TimeoutError) as e:
            self._backoff_s = min(BACKOFF_MAX_S, self._backoff_s * 2)
            self._retry_at = self._clock() + self._backoff_s
            log.debug("state store %s still unreachable: %s", self.where, e)
        else:
            self._mark_up()
        finally:
            self._probe = None

    def _count(self, op: str) -> None:
        self.errors += 1
        if self._on_error is not None:
            self._on_error(op)

    def _failed(self, op: str, exc: BaseException) -> None:
        self._count(op)
        was = self.up
        self.up = False
        self._retry_at = self._clock() + self._backoff_s
        if was is not False:
            reason = "no answer within the budget" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            log.warning(
                "state store %s unreachable (%s): rules bound by shared counters skip injection, "
                "probability-only rules go on; retrying in the background",
                self.where,
                reason,
            )
            if self._on_up is not None:
                self._on_up(False)

    def _mark_up(self) -> None:
        if self.up is not True:
            if self.up is False:
                log.warning("state store %s reachable again", self.where)
            self.up = True
            self._backoff_s = BACKOFF_FIRST_S
            if self._on_up is not None:
                self._on_up(True)

    async def close(self) -> None:
        """Close the connections (idempotent); a probe in flight is cancelled."""
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.cancel()
        await self.batches.close()
        try:
            await self.client.aclose()
        except (RedisError, OSError, RuntimeError) as e:  # a connection bound to a loop that is gone
            log.debug("closing the state store link: %s", e)

    def describe(self) -> dict[str, Any]:
        """For /status: where, whether reachable, how many calls failed."""
        return {
            "backend": "redis",
            "url": self.where,
            "up": self.up,
            "errors": self.errors,
            "calls": self.batches.calls,
            "writes": self.batches.writes,
        }
