"""Cost per exchange through the real proxy: on the span, the exchange log and the Prometheus counter."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from genai_prices import Usage, calc_price

from tests.e2e.conftest import Spans
from tests.proxy.test_passthrough import collect, wait_for


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

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["cost"]["total"] for line in lines] == pytest.approx([ex.cost.total for ex in seen])
    assert lines[0]["cost"]["currency"] == "USD"

    registry = proxy.addon.pipeline.exporters.metrics.registry
    sample = registry.get_sample_value("brownout_cost_usd_total", {"provider": "openai", "model": "gpt-4o-mini"})
    assert sample == pytest.approx(seen[0].cost.total)
