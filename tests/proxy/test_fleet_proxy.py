"""A real proxy on a shared store: counted tool rules decided from the response, buffered or streamed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import yaml

from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def _config(server: RedisServer) -> str:
    return yaml.safe_dump(
        {
            "version": 1,
            "proxy": {"announce_faults": True},
            "state": {"backend": "redis", "url": server.url, "timeout_ms": 2000},
            "rules": [
                {
                    "name": "cut-tool-calls",
                    "match": {"provider": "openai", "tool": "get_*"},
                    "fault": {"type": "truncate", "at_fraction": 0.5},
                    "schedule": {"first": 2},
                }
            ],
        }
    )


def _chat(client: httpx.Client, url: str, stream: bool) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS}
    return client.post(
        f"{url}/v1/chat/completions", json={**body, "stream": stream}, headers={"authorization": "Bearer sk"}
    )


def test_a_counted_tool_rule_is_decided_by_the_fleet_on_a_buffered_body(
    redis_server: RedisServer, upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    proxy = brownout_proxy(_config(redis_server), upstream=upstream)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        announced = [_chat(client, upstream.url, stream=False).headers.get("x-brownout-fault") for _ in range(3)]
    assert announced == ["cut-tool-calls:truncate", "cut-tool-calls:truncate", None]
    decisions = proxy.addon.engine.decisions.recent()
    assert [d.outcome for d in decisions] == ["fired", "fired", "skipped_schedule"]
    assert decisions[2].reason == "first: match 3 > 2; response calls tool 'get_weather'"
    fleet = proxy.call(lambda: proxy.addon.fleet.describe())
    assert fleet["backend"] == "redis" and fleet["up"] is True and fleet["errors"] == 0


def test_mid_stream_a_counted_tool_rule_is_skipped_and_says_why(
    redis_server: RedisServer, upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    proxy = brownout_proxy(_config(redis_server), upstream=upstream)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
        answer = _chat(client, upstream.url, stream=True)
    assert answer.status_code == 200 and b"data: [DONE]" in answer.content  # the stream went through whole
    [d] = proxy.addon.engine.decisions.recent()
    assert d.outcome == "skipped_state_unavailable"
    assert d.reason == "response calls tool 'get_weather' mid-stream, where the shared store cannot be awaited"
