"""Realtime event rules in a fleet (state on Redis): an event is decided in mitmproxy's message hook, which cannot
wait for the store, so a counted rule is skipped there and says why (a fleet never exceeds a cap it could not
check); a probability-only rule acts as in one process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import Recorder, ask_weather, openai_realtime, proxy_environment, wait_for
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]


def test_counted_event_rules_are_skipped_and_say_why_probability_rules_act(
    redis_server: RedisServer,
    upstream_tls: Any,
    brownout_proxy: Callable[..., ProxyHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    event = {"provider": "openai_realtime", "event": "response.function_call_arguments.done"}
    config = {
        "version": 1,
        "seed": 1,
        "state": {"backend": "redis", "url": redis_server.url, "timeout_ms": 2000},
        "rules": [
            {"name": "counted", "match": event, "fault": {"type": "drop"}, "schedule": {"first": 1}},
            {
                "name": "always",
                "match": event,
                "fault": {"type": "malformed_json", "target": "tool_arguments"},
                "schedule": {"probability": 1.0},
            },
        ],
    }
    proxy = brownout_proxy(yaml.safe_dump(config), upstream=upstream_tls)
    proxy_environment(monkeypatch, proxy)
    rec = Recorder(proxy)
    with openai_realtime(upstream_tls) as conn:
        calls, _ = ask_weather(conn)
    done = [e for e in calls if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1  # not dropped: the counted rule did not act
    with pytest.raises(ValueError):
        json.loads(done[0].arguments)  # the probability rule did
    decisions = {d.rule: d for d in proxy.addon.engine.decisions.recent()}
    assert decisions["always"].outcome == "fired"
    assert decisions["counted"].outcome == "skipped_state_unavailable"
    assert (
        decisions["counted"].reason
        == "a realtime event, decided as it passes, where the shared store cannot be awaited"
    )
    assert wait_for(lambda: rec.generations())
