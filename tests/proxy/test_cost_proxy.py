"""Cost per exchange through the real proxy: on the span, the exchange log and the Prometheus counter;
a cached prompt at the cache rates."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler

import pytest
from genai_prices import Usage, calc_price

from tests.e2e.conftest import Spans
from tests.proxy.realtime_clients import wait_for as poll
from tests.proxy.test_passthrough import collect, wait_for
from tests.threadserver import serving_handler


def test_an_openai_call_is_priced_everywhere(tmp_path, upstream, brownout_proxy, openai_client, anthropic_client):
    log = tmp_path / "exchanges.jsonl"
    seen, on_exchange = collect()
    cfg = f"version: 1\nexporters: {{jsonl: {{exchanges_path: {json.dumps(str(log))}}}}}\n"
    proxy = brownout_proxy(cfg, upstream=upstream, on_exchange=on_exchange)
    spans = Spans(proxy)
    openai_client(proxy, upstream).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "What is the weather in Paris?"}]
    )
    anthropic_client(proxy, upstream).messages.create(
        model="claude-haiku-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hello there"}]
    )
    wait_for(seen, 2)
    for ex, provider_id in zip(seen, ("openai", "anthropic"), strict=True):
        expected = calc_price(
            Usage(input_tokens=ex.usage.input_tokens, output_tokens=ex.usage.output_tokens),
            ex.response_model or ex.model,
            provider_id=provider_id,
            genai_request_timestamp=datetime.fromtimestamp(ex.timings.start, UTC),
        )
        assert ex.cost is not None and ex.cost.currency == "USD"
        assert ex.cost.total == pytest.approx(float(expected.total_price)) and ex.cost.total > 0

    by_session = {s.attributes["gen_ai.provider.name"]: s for s in spans.wait(seen[0].session, 2)}
    span = by_session["openai"]
    assert span.attributes["brownout.cost.total"] == pytest.approx(seen[0].cost.total)
    assert span.attributes["brownout.cost.currency"] == "USD"

    # The exchange log is written by its own thread: the lines may follow the listeners by a moment.
    assert poll(lambda: len(log.read_text().splitlines()) == 2)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["cost"]["total"] for line in lines] == pytest.approx([ex.cost.total for ex in seen])
    assert lines[0]["cost"]["currency"] == "USD"

    registry = proxy.addon.pipeline.exporters.metrics.registry
    sample = registry.get_sample_value("brownout_cost_usd_total", {"provider": "openai", "model": "gpt-4o-mini"})
    assert sample == pytest.approx(seen[0].cost.total)


def _anthropic_stream_with_a_cached_prompt() -> bytes:
    usage = {
        "input_tokens": 40,
        "cache_creation_input_tokens": 1_000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 0},
        "cache_read_input_tokens": 9_000,
        "output_tokens": 1,
    }
    message = {
        "id": "msg_c",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "stop_reason": None,
        "usage": usage,
    }
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


@pytest.fixture
def cached_prompt_upstream() -> Iterator[str]:
    """An Anthropic upstream whose every answer is a stream that read most of its prompt from the cache."""
    body = _anthropic_stream_with_a_cached_prompt()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving_handler(Handler) as url:
        yield url


def test_a_cached_prompt_is_priced_at_the_cache_rates(brownout_proxy, anthropic_client, cached_prompt_upstream):
    seen, on_exchange = collect()
    proxy = brownout_proxy("version: 1\n", on_exchange=on_exchange)
    spans = Spans(proxy)
    client = anthropic_client(proxy, cached_prompt_upstream)
    with client.messages.stream(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        assert stream.get_final_text() == "Hi"
    wait_for(seen, 1)
    (ex,) = seen
    assert (ex.usage.input_tokens, ex.usage.output_tokens) == (40 + 1_000 + 9_000, 12)
    expected = calc_price(
        Usage(input_tokens=10_040, output_tokens=12, cache_read_tokens=9_000, cache_write_tokens=1_000),
        "claude-sonnet-4-5",
        provider_id="anthropic",
        genai_request_timestamp=datetime.fromtimestamp(ex.timings.start, UTC),
    )
    full_rate = calc_price(
        Usage(input_tokens=10_040, output_tokens=12),
        "claude-sonnet-4-5",
        provider_id="anthropic",
        genai_request_timestamp=datetime.fromtimestamp(ex.timings.start, UTC),
    )
    assert ex.cost is not None and ex.cost.total == pytest.approx(float(expected.total_price))
    assert ex.cost.total < float(full_rate.total_price) / 3  # the cache reads are most of the prompt
    (span,) = spans.wait(ex.session, 1)
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 9_000
    assert span.attributes["gen_ai.usage.cache_creation.input_tokens"] == 1_000
    assert span.attributes["brownout.cost.total"] == pytest.approx(ex.cost.total)
