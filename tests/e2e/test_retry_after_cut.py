"""retry_discipline on agents that re-send after a cut stream, through the real proxy with the official openai SDK.

The SDK does not retry a stream cut mid-body: it returns the partial text (a clean cut) or raises
APIConnectionError (a reset). An agent loop that re-sends at once is flagged as one that re-sends at once
after a 5xx is; one that backs off as Codex CLI does (200 ms x 2^(n-1), +-10%) is not; and an agent that
goes on with the partial answer (its next turn carries it) is not retrying at all.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

from brownout.invariants.records import Violation
from brownout.proxy.embed import ProxyHandle

MODEL = "gpt-4o-mini"
QUESTION = [{"role": "user", "content": "Tell me about Paris."}]


def _config(fault: str, cuts: int) -> str:
    return f"""
seed: 3
rules:
  - name: flaky
    match: {{provider: openai, stream: true}}
    fault: {fault}
    schedule: {{first: {cuts}}}
invariants:
  - {{type: retry_discipline}}
"""


CUT = "{type: truncate, after_events: 2}"
CUT_RESET = "{type: truncate, after_events: 2, close: reset}"
UNAVAILABLE = "{type: http_error, status: 503}"


def _stream(client: openai.OpenAI, messages: list[dict[str, Any]]) -> tuple[str, bool]:
    """One streamed answer: its text, and whether the model finished it (a finish_reason arrived)."""
    text, finished = "", False
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finished = finished or choice.finish_reason is not None
    return text, finished


def _ask(client: openai.OpenAI, wait: Callable[[int], float], attempts: int = 6) -> int:
    """An agent loop: re-send the question until an answer is whole, waiting wait(n) before the n-th re-send."""
    for attempt in range(attempts):
        if attempt:
            time.sleep(wait(attempt))
        try:
            _, finished = _stream(client, QUESTION)
        except (openai.APIConnectionError, openai.APIStatusError):
            continue  # a reset, or a 5xx: try again
        if finished:
            return attempt
    raise AssertionError("no whole answer")


def _codex_backoff(attempt: int) -> float:
    return 0.2 * 2 ** (attempt - 1) * random.uniform(0.9, 1.1)


def _run(
    brownout_proxy: Callable[..., ProxyHandle],
    openai_client: Any,
    upstream: Any,
    config: str,
    agent: Callable[..., Any],
) -> tuple[Any, list[Violation]]:
    proxy = brownout_proxy(config, upstream=upstream)
    violations: list[Violation] = []
    proxy.addon.pipeline.violation_listeners.append(violations.append)
    result = agent(openai_client(proxy, upstream, session="agent"))
    deadline = time.monotonic() + 5
    while proxy.addon.in_flight and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # the last exchange's invariants run just after its flow ends
    return result, [v for v in violations if v.invariant == "retry_discipline"]


@pytest.mark.parametrize("fault", [CUT, CUT_RESET], ids=["clean-cut", "reset"])
def test_resending_at_once_after_cut_streams_is_flagged_like_after_5xx(
    brownout_proxy, openai_client, upstream, fault: str
) -> None:
    at_once = lambda client: _ask(client, lambda n: 0.0)
    resent, cut = _run(brownout_proxy, openai_client, upstream, _config(fault, 5), at_once)
    assert resent == 5  # five re-sends, the last one whole
    _, unavailable = _run(brownout_proxy, openai_client, upstream, _config(UNAVAILABLE, 5), at_once)
    checks = [v.details["check"] for v in cut]
    assert checks[0] == "backoff" and "max_retries" in checks, checks
    assert checks == [v.details["check"] for v in unavailable]
    assert cut[0].rule == "flaky" and cut[0].fault == "truncate"
    assert "after a failure without backing off" in cut[0].message


def test_backing_off_as_codex_cli_does_after_cut_streams_is_not_flagged(
    brownout_proxy, openai_client, upstream
) -> None:
    resent, found = _run(
        brownout_proxy, openai_client, upstream, _config(CUT, 3), lambda client: _ask(client, _codex_backoff)
    )
    assert resent == 3 and found == []


def test_going_on_with_the_partial_answer_is_no_retry(brownout_proxy, openai_client, upstream) -> None:
    def agent(client: openai.OpenAI) -> str:
        partial, finished = _stream(client, QUESTION)
        assert partial and not finished  # cut, no error: the SDK hands back what arrived
        follow_up = [*QUESTION, {"role": "assistant", "content": partial}, {"role": "user", "content": "Go on."}]
        return _stream(client, follow_up)[0]  # at once: the next turn, not the same request again

    answer, found = _run(brownout_proxy, openai_client, upstream, _config(CUT, 1), agent)
    assert answer and found == []
