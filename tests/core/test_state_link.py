"""The shared-store link against a real redis-server: budgets, counted failures, the breaker, recovery."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from brownout.core.state import RedisLink, StateConfig
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]


def link_for(server: RedisServer, errors: list[str], ups: list[bool] | None = None, **kw: Any) -> RedisLink:
    # Tests of the budget give theirs; the rest get a generous one, since a first call that loads a script on a
    # busy machine can outlast the default 50 ms, and a late call is (rightly) a failure.
    config = StateConfig(backend="redis", url=server.url, **{"timeout_ms": 2000, **kw})
    return RedisLink(config, on_error=errors.append, on_up=None if ups is None else ups.append)


def test_memory_is_the_default_and_redis_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BROWNOUT_REDIS_URL", raising=False)
    assert StateConfig().backend == "memory"
    with pytest.raises(ValidationError, match="BROWNOUT_REDIS_URL"):
        StateConfig(backend="redis")
    monkeypatch.setenv("BROWNOUT_REDIS_URL", "redis://10.0.0.7:6379/2")
    assert StateConfig(backend="redis").resolve_url() == "redis://10.0.0.7:6379/2"
    with pytest.raises(ValidationError, match="must start with"):
        StateConfig(backend="redis", url="http://10.0.0.7:6379")


def test_the_password_never_shows() -> None:
    config = StateConfig(backend="redis", url="redis://:s3cret-pass@cache.internal:6380/1")
    assert config.display_url() == "redis://***@cache.internal:6380/1"
    assert "s3cret" not in str(RedisLink(config).describe())


def test_calls_go_through_and_keys_carry_the_prefix(redis_server: RedisServer) -> None:
    async def main() -> tuple[Any, Any]:
        link = link_for(redis_server, errors := [], key_prefix="fleet-a:")
        incr = link.script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        n = await link.call("count", lambda r: incr(keys=[link.key("rule", "r1", "matches")], args=[3]), None)
        got = await link.call("read", lambda r: r.get("fleet-a:rule:r1:matches"), None)
        await link.close()
        assert errors == [] and link.up is True
        return n, got

    assert asyncio.run(main()) == (3, b"3")


def test_a_dead_store_costs_one_budget_then_answers_at_once_and_comes_back(redis_server: RedisServer) -> None:
    async def main() -> None:
        link = link_for(redis_server, errors := [], ups := [], timeout_ms=50)
        for _ in range(100):  # a first connection on a busy machine can outlast the 50 ms budget
            if await link.call("ping", lambda r: r.ping(), False) is True:
                break
            await asyncio.sleep(0.05)
        assert link.up is True
        errors.clear()
        del ups[:-1]  # from the live link on
        redis_server.stop()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await link.call("count", lambda r: r.incr("k"), "fallback") == "fallback"
        first_s = loop.time() - t0
        t0 = loop.time()
        answers = [await link.call("count", lambda r: r.incr("k"), "fallback") for _ in range(50)]
        rest_s = loop.time() - t0
        assert answers == ["fallback"] * 50 and errors == ["count"] * 51
        assert first_s < 1.0 and rest_s < 0.05, (first_s, rest_s)  # down: no call waits on the dead server
        assert ups == [True, False] and link.up is False
        redis_server.start()
        for _ in range(200):  # the background probe finds it back (backoff 0.25 s, doubling)
            if await link.call("count", lambda r: r.incr("k"), None) == 1:
                break
            await asyncio.sleep(0.05)
        assert link.up is True and ups == [True, False, True]
        await link.close()

    asyncio.run(main())


def test_a_slow_store_is_cut_at_the_budget(redis_server: RedisServer) -> None:
    async def main() -> None:
        link = link_for(redis_server, errors := [], timeout_ms=50)
        slow = link.script("local t = redis.call('TIME'); while true do local n = redis.call('TIME'); "
                           "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 300000 then return 1 end end")  # fmt: skip
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await link.call("slow", lambda r: slow(), "late") == "late"
        assert loop.time() - t0 < 0.25 and errors == ["slow"]
        await link.close()

    asyncio.run(main())


def test_a_store_that_never_answers_costs_one_budget_not_one_per_call() -> None:
    import socket

    async def main() -> None:
        with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
            silent.bind(("127.0.0.1", 0))
            silent.listen(64)
            url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
            link = RedisLink(StateConfig(backend="redis", url=url, timeout_ms=50), on_error=(errors := []).append)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            answers = [await link.call("count", lambda r: r.incr("k"), "fallback") for _ in range(40)]
            elapsed = loop.time() - t0
            await link.close()
        assert answers == ["fallback"] * 40 and errors == ["count"] * 40
        assert elapsed < 0.5, f"40 calls took {elapsed:.2f} s: each waited out its budget"  # 40 x 50 ms = 2 s

    asyncio.run(main())


def _clients(server: RedisServer) -> int:
    """Client connections the server has now, the one asking left out."""
    info = server.command("INFO", "clients").decode()
    return int(info.split("connected_clients:")[1].split()[0]) - 1


def test_a_burst_shares_a_bounded_pool_of_connections_within_the_budget(redis_server: RedisServer) -> None:
    async def main() -> None:
        link = link_for(redis_server, errors := [], max_connections=3, timeout_ms=2000)
        # Each call holds its connection a while (BLPOP on an empty list waits without blocking the server).
        answers = await asyncio.gather(
            *(link.call("wait", lambda r: r.blpop(["empty"], timeout=0.02), "fallback") for _ in range(30))
        )
        opened = _clients(redis_server)  # the pool keeps what it opened
        assert answers == [None] * 30 and errors == []  # every call waited for a connection and went through
        assert opened <= 3, opened
        await link.close()

    asyncio.run(main())
