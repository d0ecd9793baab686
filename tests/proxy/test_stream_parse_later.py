"""A streamed answer nothing reads before its exchange completes is parsed after it reached the client
(proxy/inspection.py, `later`): the chunks pass through untouched and the exchange records the same.
With a fault plan, or for MCP, the copy is parsed as it streams, as those read it while it is open."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire import by_provider
from brownout.core.wire.framing import SSEFramer
from brownout.core.wire.openai_stream import ChatStreamParser
from brownout.faults.base import StreamTiming
from brownout.proxy import idlework, inspection
from brownout.proxy.streaming import StreamTap


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(body).encode() + b"\n\n"


TOOL = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
EVENTS = [
    _chunk({"role": "assistant", "tool_calls": [TOOL]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
    _chunk({}, "tool_calls"),
    b"data: [DONE]\n\n",
]


def _tap(*, later: bool, encoding: str = "", timing: StreamTiming | None = None) -> tuple[StreamTap, Exchange]:
    ex = Exchange(id="1", session="s", provider="openai", content_type="text/event-stream", stream=True)
    tap = StreamTap(
        ex,
        by_provider("openai"),
        SSEFramer(),
        None,
        timing,
        Guard(),
        on_reset=lambda now: None,
        content_encoding=encoding,
        parse_later=later,
    )
    return tap, ex


def _stream(tap: StreamTap, chunks: list[bytes]) -> bytes:
    return b"".join(b"".join(tap(c)) for c in [*chunks, b""])


def _recorded(ex: Exchange) -> tuple[Any, ...]:
    return ex.stream_events, ex.stream_complete, [(c.name, c.arguments) for c in ex.tool_calls], ex.response_bytes


def test_the_copy_is_parsed_at_close_and_records_what_a_live_parse_does() -> None:
    body = b"".join(EVENTS)
    chunks = [body[i : i + 37] for i in range(0, len(body), 37)]  # events split anywhere
    later, ex = _tap(later=True)
    assert later.parses_later
    assert _stream(later, chunks) == body  # passed through as it came
    assert ex.stream_events == 0 and not ex.tool_calls  # nothing parsed yet
    later.close()
    live, ex_live = _tap(later=False)
    assert not live.parses_later
    _stream(live, chunks)
    live.close()
    assert _recorded(ex) == _recorded(ex_live)
    assert ex.stream_complete is True and [c.name for c in ex.tool_calls] == ["get_weather"]


def test_a_long_stream_is_parsed_as_it_goes_once_the_kept_bytes_pass_the_bound() -> None:
    tap, ex = _tap(later=True)
    filler = _chunk({"content": "x" * 1000})
    sent = 0
    while sent <= inspection.LATER_MAX:
        tap(filler)
        sent += len(filler)
    assert ex.stream_events >= inspection.LATER_MAX // len(filler)  # memory bounded: parsed, not kept
    tap(b"data: [DONE]\n\n")
    tap(b"")
    tap.close()
    assert ex.stream_events == sent // len(filler) + 1 and ex.stream_complete is True


@pytest.mark.parametrize(
    ("encoding", "timing"),
    [("gzip", None), ("", StreamTiming(reset_after_bytes=10_000))],
    ids=["compressed (decoded in slices)", "a reset that cuts the body"],
)
def test_a_stream_that_is_decoded_or_cut_is_parsed_as_it_goes(encoding: str, timing: StreamTiming | None) -> None:
    tap, _ = _tap(later=True, encoding=encoding, timing=timing)
    assert not tap.parses_later


CHAOS = """
version: 1
{rules}
"""
SLOW_RULE = """rules:
  - {name: slow, match: {provider: openai}, fault: {type: latency, delay_ms: 1}}"""


def _parse_times(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    seen: list[float] = []
    feed = ChatStreamParser.feed

    def timed(self: ChatStreamParser, event: Any) -> None:
        seen.append(time.monotonic())
        feed(self, event)

    monkeypatch.setattr(ChatStreamParser, "feed", timed)
    return seen


def _call(client: httpx.Client, upstream: Any) -> float:
    body = {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "weather in Oslo?"}]}
    body["tools"] = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    with client.stream("POST", f"{upstream.url}/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200
        assert b"[DONE]" in resp.read()
    return time.monotonic()


@pytest.mark.parametrize("rules", ["", SLOW_RULE], ids=["no fault plan", "a fault plan"])
def test_through_the_proxy_the_copy_is_parsed_after_the_answer_unless_a_plan_reads_it(
    brownout_proxy: Any, upstream: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rules: str
) -> None:
    # The idle moment is stretched (as in test_idle_readers.py) and the client stays connected, so
    # nothing runs the deferred work before the test reads the exchange, which completes it on the hop.
    monkeypatch.setattr(idlework, "IDLE_S", 0.4)
    monkeypatch.setattr(idlework, "MAX_S", 1.2)
    seen = _parse_times(monkeypatch)
    config = tmp_path / "chaos.yaml"
    config.write_text(CHAOS.format(rules=rules))
    done: list[Exchange] = []
    proxy = brownout_proxy(config, upstream=upstream, on_exchange=done.append)
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
        answered = _call(client, upstream)
        proxy.call(lambda: None)  # a hop onto the loop completes what waits for an idle moment
        [ex] = done
    assert [c.name for c in ex.tool_calls] == ["get_weather"] and ex.stream_complete is True
    assert seen
    if rules:
        assert max(seen) < answered  # parsed live: the plan may read it while the stream is open
    else:
        assert min(seen) > answered  # parsed once the client had its whole answer
