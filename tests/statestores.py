"""Session stores for tests, one fixture for both backends: the in-process store and a real redis-server.

`stores(scenario)` runs `async scenario(factory)` on a fresh event loop; each `factory(**bounds)` call
is one process's store, and all of them share one backing store (as replicas share one Redis).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.redis_sessions import RedisSessions
from brownout.core.state.sessions import Committed, MemorySessions, SessionChange, SessionRecord, SessionStates, Status
from tests.redisserver import REDIS_SERVER, RedisServer, running_redis

__all__ = ["Factory", "Runner", "Wrapped", "stores"]

Factory = Callable[..., SessionStates]
Runner = Callable[[Callable[[Factory], Awaitable[None]]], None]


def _runner(server: RedisServer | None) -> Runner:
    def run(scenario: Callable[[Factory], Awaitable[None]]) -> None:
        async def main() -> None:
            memory: dict[tuple[Any, ...], MemorySessions] = {}
            links: list[RedisLink] = []

            def factory(**bounds: Any) -> SessionStates:
                if server is None:
                    return memory.setdefault(tuple(sorted(bounds.items())), MemorySessions(**bounds))
                link = RedisLink(StateConfig(backend="redis", url=server.url, timeout_ms=2000))
                links.append(link)
                return RedisSessions(link, **bounds)

            try:
                await scenario(factory)
            finally:
                for link in links:
                    await link.close()

        asyncio.run(main())

    return run


@pytest.fixture(params=["memory", "redis"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runner]:
    if request.param == "memory":
        yield _runner(None)
        return
    if not Path(REDIS_SERVER).exists():  # a failure, not a skip: CI must never pass without the real server
        pytest.fail("redis-server absent: `make test` installs the Debian package redis-server")
    with running_redis(tmp_path) as server:
        yield _runner(server)


class Wrapped:
    """A store that hands every call to another: subclasses step in where a test needs to (hold, count)."""

    def __init__(self, states: SessionStates) -> None:
        self.states = states
        self.idle_s, self.max_sessions, self.history_max = states.idle_s, states.max_sessions, states.history_max

    async def load(self, session_id: str) -> SessionRecord | Status:
        return await self.states.load(session_id)

    async def commit(self, record: SessionRecord, change: SessionChange, now: float) -> Committed | Status:
        return await self.states.commit(record, change, now)

    async def claim_idle(self, now: float, limit: int = 100) -> list[SessionRecord] | Status:
        return await self.states.claim_idle(now, limit)
