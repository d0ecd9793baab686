"""A fleet's store decides answer-only rules while the request travels; request-stage rules before it goes.

The store (a real redis-server) sits behind a relay that holds its commands on demand: while held, a
request whose rules act only on the answer reaches upstream all the same, and its answer waits for the
decision, which then acts on it as if it had been taken first. A rule that may answer in upstream's
place holds the request until the store has spoken.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import yaml

from brownout.proxy.freeport import free_port
from tests.redisgate import RedisGate
from tests.redisserver import RedisServer, redis_server

__all__ = ["redis_server"]

pytestmark = pytest.mark.timeout(120)

MSG = [{"role": "user", "content": "weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
BAD_ARGS = {"type": "malformed_json", "target": "tool_arguments"}


@pytest.fixture
def gate(redis_server: RedisServer) -> Iterator[RedisGate]:
    with RedisGate(redis_server) as g:
        yield g


def _config(gate: RedisGate, fault: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "version": 1,
            "proxy": {"announce_faults": True},
            "state": {"backend": "redis", "url": gate.url, "timeout_ms": 8000},
            "rules": [
                {"name": "once", "match": {"provider": "openai"}, "fault": fault, "schedule": {"max_injections": 1}}
            ],
        }
    )


def _wait_for(what: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if what():
            return True
        time.sleep(0.01)
    return False


def _chat_paths(upstream: Any) -> int:
    return sum(1 for r in upstream.requests_seen if r.path.endswith("/chat/completions"))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_answer_rule_is_decided_while_the_request_travels(
    gate: RedisGate, upstream: Any, brownout_proxy: Callable[..., Any], openai_client: Callable[..., Any], stream: bool
) -> None:
    seen: list[Any] = []
    proxy = brownout_proxy(_config(gate, BAD_ARGS), upstream=upstream, on_exchange=seen.append)
    client = openai_client(proxy, upstream)

    def tool_arguments() -> str:
        if stream:
            chunks = client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS, stream=True)
            return "".join(
                tc.function.arguments or "" for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])
            )
        answer = client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS)
        return answer.choices[0].message.tool_calls[0].function.arguments

    with ThreadPoolExecutor(1) as pool:
        with gate.held():
            call: Future[str] = pool.submit(tool_arguments)
            # Upstream has the request while the store has not answered: forwarding did not wait for it.
            assert _wait_for(lambda: _chat_paths(upstream) == 1)
            time.sleep(0.3)
            assert not call.done(), "the answer went out before its rules were decided"
        args = call.result(timeout=30)
        assert json.loads(tool_arguments())  # max_injections: 1 is spent, the next call is whole
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)  # the decision, taken while upstream answered, acted on that answer
    assert _wait_for(lambda: len(seen) == 2)
    assert [[f.rule for f in ex.faults] for ex in seen] == [["once"], []]
    assert [d.outcome for d in proxy.addon.engine.decisions.recent()] == ["fired", "skipped_blast_radius"]


def test_a_rule_that_may_answer_in_upstreams_place_holds_the_request(
    gate: RedisGate, upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    proxy = brownout_proxy(_config(gate, {"type": "http_error", "status": 503}), upstream=upstream)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client, ThreadPoolExecutor(1) as pool:
        chat = lambda: client.post(f"{upstream.url}/v1/chat/completions", json={"model": "gpt-4o", "messages": MSG})
        with gate.held():
            first = pool.submit(chat)
            time.sleep(0.5)
            assert _chat_paths(upstream) == 0, "the request went upstream before the store decided it"
        assert first.result(timeout=30).status_code == 503
        assert chat().status_code == 200
    assert _chat_paths(upstream) == 1  # the one the fault answered never reached upstream


def test_an_exchange_that_fails_before_the_decision_ends_with_it(
    gate: RedisGate, brownout_proxy: Callable[..., Any]
) -> None:
    """Upstream refuses the connection while the store still decides: the client sees the failure at once,
    and the exchange is recorded once its decision is in, with the fault that was decided."""
    seen: list[Any] = []
    ended = threading.Event()

    def on_exchange(ex: Any) -> None:
        seen.append(ex)
        ended.set()

    proxy = brownout_proxy(_config(gate, BAD_ARGS), on_exchange=on_exchange)
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30) as client:
        body = {"model": "gpt-4o", "messages": MSG}
        with gate.held():
            with pytest.raises(httpx.TransportError):  # a refused connection reaches the client as a reset
                client.post(f"http://127.0.0.1:{free_port()}/v1/chat/completions", json=body)  # nothing there
            time.sleep(0.3)
            assert not ended.is_set(), "the exchange ended before its rules were decided"
        assert ended.wait(30)
    [ex] = seen
    assert ex.error_type == "connection" and [f.rule for f in ex.faults] == ["once"]
