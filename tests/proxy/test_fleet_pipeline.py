"""The pipeline with a shared session store: checks as ordered jobs after the response, drops counted."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from brownout.core.state.sessions import SessionRecord, SessionStates, Status
from brownout.proxy.checkqueue import OrderedJobs
from tests.redisserver import RedisServer, redis_server
from tests.statestores import Wrapped

__all__ = ["redis_server"]

CONFIG = """\
version: 1
state: {{backend: redis, url: "{url}"}}
invariants:
  - {{type: latency_budget, total_ms: 0.001}}  # every exchange breaks it: one violation per exchange checked
"""


class Held(Wrapped):
    """A store whose loads wait until released (a slow store), on the proxy's loop."""

    def __init__(self, states: SessionStates) -> None:
        super().__init__(states)
        self.gate = asyncio.Event()

    async def load(self, session_id: str) -> SessionRecord | Status:
        await self.gate.wait()
        return await super().load(session_id)


def _chat(url: str) -> int:
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"x-brownout-session": "s1"}
    return httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, trust_env=False).status_code


def _until(predicate: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def test_checks_wait_for_a_slow_store_without_holding_responses_and_a_full_queue_is_counted(
    brownout_proxy: Any, upstream: Any, redis_server: RedisServer
) -> None:
    proxy = brownout_proxy(CONFIG.format(url=redis_server.url), mode="reverse", upstream=upstream)
    pipeline = proxy.addon.pipeline
    fleet = pipeline.fleet
    assert fleet is not None
    held = Held(fleet.checks.states)
    fleet.checks.states = held
    fleet.jobs = OrderedJobs(max_running=1, max_queued=1)
    exported: list[Any] = []
    pipeline.listeners.append(exported.append)
    metrics = pipeline.exporters.metrics
    started = time.monotonic()
    assert [_chat(proxy.url) for _ in range(3)] == [200, 200, 200]  # answered while the checks wait
    assert time.monotonic() - started < 5
    # The first check waits on the store, the second waits behind it, the third finds the queue full:
    # that exchange is exported at once, unchecked, and counted.
    _until(lambda: len(exported) == 1)
    assert metrics.checks_dropped._value.get() == 1
    assert metrics.violations.labels("latency_budget", "warning")._value.get() == 0
    proxy.addon.on_loop.loop.call_soon_threadsafe(held.gate.set)
    _until(lambda: len(exported) == 3)
    assert metrics.violations.labels("latency_budget", "warning")._value.get() == 2
    assert fleet.jobs.queued == 0 and fleet.jobs.running == 0


def test_with_the_memory_backend_checks_stay_in_process(brownout_proxy: Any, upstream: Any) -> None:
    memory = "\n".join(line for line in CONFIG.format(url="").splitlines() if not line.startswith("state:"))
    proxy = brownout_proxy(memory, mode="reverse", upstream=upstream)
    pipeline = proxy.addon.pipeline
    assert pipeline.fleet is None
    exported: list[Any] = []
    pipeline.listeners.append(exported.append)
    assert _chat(proxy.url) == 200
    _until(lambda: len(exported) == 1)
    assert pipeline.exporters.metrics.violations.labels("latency_budget", "warning")._value.get() == 1
