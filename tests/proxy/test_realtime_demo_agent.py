"""The demo's realtime agent through the real proxy: it survives what voice agents meet (a dropped connection,
a session cap, a broken tool call), asking a turn again in a new session after a backoff."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from brownout.proxy.demo.realtime_agent import run_realtime_agent
from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import Recorder, proxy_environment, wait_for


@pytest.fixture
def through(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Recorder]:
    def start(rules: str) -> Recorder:
        proxy = brownout_proxy(f"seed: 3\nrules:\n{rules}", upstream=upstream_tls)
        proxy_environment(monkeypatch, proxy)
        return Recorder(proxy)

    return start


def test_a_dropped_connection_is_reopened_and_the_turn_asked_again(through: Any, upstream_tls: Any) -> None:
    rec = through(
        "  - {name: drop, match: {provider: openai_realtime, event: response.done}, fault: {type: reset}, schedule: {first: 1}}\n"
    )
    summary = run_realtime_agent(upstream_tls.url, turns=2)
    assert summary.errors == 0 and summary.sessions == 2 and summary.closed_on_us == [1006]
    assert [t.sessions for t in summary.turns] == [2, 1]
    assert all(t.answer == "It is 18°C and cloudy in Paris." for t in summary.turns)
    assert wait_for(lambda: len(rec.sessions()) == 2)
    assert sorted(s.realtime.close_code for s in rec.sessions()) == [1000, 1006]  # type: ignore[union-attr]


def test_a_broken_tool_call_goes_back_to_the_model_and_a_session_cap_is_survived(
    through: Any, upstream_tls: Any
) -> None:
    through(
        "  - {name: bad, match: {provider: openai_realtime, event: response.function_call_arguments.done}, fault: {type: malformed_json, target: tool_arguments}, schedule: {first: 1}}\n"
        "  - {name: cap, match: {provider: openai_realtime, event: response.done}, fault: {type: close}, schedule: {first: 1}}\n"
    )
    summary = run_realtime_agent(upstream_tls.url, turns=2)
    assert summary.errors == 0 and summary.closed_on_us == [1001] and summary.error_events == ["session_expired"]
    first, second = summary.turns
    assert first.tool_errors == 1 and first.sessions == 2  # broken call answered, then the cap: asked again
    assert second.answer == "It is 18°C and cloudy in Paris." and second.sessions == 1
