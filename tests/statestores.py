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
from brownout.core.state.sessions import MemorySessions, SessionStates
from tests.redisserver import REDIS_SERVER, RedisServer, running_redis

__all__ = ["Factory", "Runner", "stores"]

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
