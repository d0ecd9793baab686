"""Invariants on realtime sessions through the real proxy: the openai SDK's own reconnection after a reset
judged by reconnect_discipline (and not mistaken for HTTP retries), time to first delta by latency_budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from brownout.proxy.embed import ProxyHandle
from tests.proxy.realtime_clients import Recorder, openai_realtime, proxy_environment, until, wait_for

RESET = "{name: drop, match: {event: response.output_text.delta}, fault: {type: reset}, schedule: {first: 1}}"
INVARIANTS = """invariants:
  - {type: reconnect_discipline, min_backoff_ms: 1000}
  - {type: retry_discipline}
"""


@pytest.fixture
def chaos(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str], Recorder]:
    def start(config: str) -> Recorder:
        proxy = brownout_proxy(config, upstream=upstream_tls)
        proxy_environment(monkeypatch, proxy)
        return Recorder(proxy)

    return start


# 1 s between 0.01 s and 2 s (jittered to 1.5-2 s by the SDK): a loaded machine can take a few hundred milliseconds
# to open the reconnect, and must not turn a reconnect at once into one that backed off.
@pytest.mark.parametrize(("initial_delay", "flagged"), [(0.01, True), (2.0, False)])
def test_the_sdks_reconnect_after_a_reset_is_judged_by_its_backoff(
    chaos: Any, upstream_tls: Any, initial_delay: float, flagged: bool
) -> None:
    rec = chaos(f"seed: 3\nrules:\n  - {RESET}\n{INVARIANTS}")
    reconnects = []
    with openai_realtime(
        upstream_tls, tools=False, on_reconnecting=reconnects.append, initial_delay=initial_delay
    ) as conn:
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello"}]}
        conn.conversation.item.create(item=item)
        conn.response.create()
        until(conn, "session.created")  # this session's start
        until(conn, "session.created")  # the reset: the SDK reconnected, and a new session began
        conn.response.create()
        until(conn, "response.done")
    assert [e.close_code for e in reconnects] == [1006]
    assert wait_for(lambda: len(rec.sessions()) == 2)
    first, second = sorted(rec.sessions(), key=lambda e: e.timings.start)
    assert first.realtime.closed_by == "brownout" and second.realtime.closed_by == "client"  # type: ignore[union-attr]
    found = [v["invariant"] for v in rec.violations()]
    assert found == (["reconnect_discipline"] if flagged else [])  # and no retry_discipline on realtime traffic


def test_latency_budget_on_time_to_first_delta(chaos: Any, upstream_tls: Any) -> None:
    slow = "{name: slow, match: {event: response.output_text.delta}, fault: {type: latency, delay_ms: 400}, schedule: {first: 1}}"
    rec = chaos(
        f"seed: 1\nrules:\n  - {slow}\ninvariants:\n"
        "  - {type: latency_budget, ttfc_ms: 250, operations: [realtime_inference]}\n"
    )
    with openai_realtime(upstream_tls, tools=False) as conn:
        for _ in range(2):
            conn.response.create()
            until(conn, "response.done")
    assert wait_for(lambda: rec.violations())
    (violation,) = rec.violations()
    assert violation["invariant"] == "latency_budget" and "time to first chunk" in violation["message"]
    assert violation["rule"] == "slow" and len(rec.generations()) == 2  # the second generation was fast
