"""Pricing exchanges from the genai-prices table: which provider, which date, and no network."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest
from genai_prices import Usage as PriceUsage
from genai_prices import calc_price

from brownout.core.cost import CURRENCY, Pricer
from brownout.core.exchange import Exchange, Timings, Usage

T = datetime(2025, 6, 1, tzinfo=UTC).timestamp()


def exchange(
    host: str, provider: str, model: str | None, *, operation: str = "chat", usage: Usage | None = None, **kw: object
) -> Exchange:
    return Exchange(
        id="e",
        session="s",
        scheme="https",
        host=host,
        provider=provider,
        operation=operation,
        model=model,
        usage=usage if usage is not None else Usage(12_000, 3_000),
        **({"timings": Timings(start=T)} | kw),  # type: ignore[arg-type]
    )


def reference(model: str, **how: str) -> float:
    when = datetime.fromtimestamp(T, UTC)
    return float(
        calc_price(
            PriceUsage(input_tokens=12_000, output_tokens=3_000), model, genai_request_timestamp=when, **how
        ).total_price
    )


@pytest.mark.parametrize(
    ("host", "provider", "model", "table_provider"),
    [
        ("api.openai.com", "openai", "gpt-4o-mini", "openai"),
        ("127.0.0.1", "openai", "gpt-4o-mini", "openai"),  # a gateway or mock speaking OpenAI's format
        ("api.anthropic.com", "anthropic", "claude-sonnet-4-5", "anthropic"),
        ("generativelanguage.googleapis.com", "gemini", "gemini-2.0-flash", "google"),
        ("api.groq.com", "openai", "llama-3.3-70b-versatile", "groq"),  # the URL names the provider
    ],
)
def test_priced_by_upstream_or_wire_format(host: str, provider: str, model: str, table_provider: str) -> None:
    cost = Pricer().price(exchange(host, provider, model))
    assert cost is not None and cost.currency == CURRENCY == "USD"
    assert cost.provider == table_provider
    assert cost.total == pytest.approx(reference(model, provider_id=table_provider)) and cost.total > 0
    assert cost.total == pytest.approx(cost.input + cost.output)


def test_the_served_model_is_priced_first() -> None:
    ex = exchange("api.openai.com", "openai", "gpt-4o", response_model="gpt-4o-mini-2024-07-18")
    cost = Pricer().price(ex)
    assert cost is not None and cost.model == "gpt-4o-mini"


@pytest.mark.parametrize(
    "ex",
    [
        exchange("localhost", "ollama", "llama3.2"),  # a local runtime: no list price
        exchange("127.0.0.1", "openai", "in-house-finetune"),  # not in the table: not guessed
        exchange("api.openai.com", "openai", "gpt-4o", usage=Usage()),  # no usage reported
        exchange("tools.local", "mcp", None, operation="tools/call"),  # not an LLM call
    ],
    ids=["ollama", "unknown-model", "no-usage", "tool-call"],
)
def test_unpriced(ex: Exchange) -> None:
    assert Pricer().price(ex) is None


def test_prices_are_those_of_the_exchange_date() -> None:
    # OpenAI cut o3's price on 2025-06-10; the table keeps both, dated.
    pricer = Pricer()
    before = exchange(
        "api.openai.com", "openai", "o3", timings=Timings(start=datetime(2025, 6, 1, tzinfo=UTC).timestamp())
    )
    after = exchange(
        "api.openai.com", "openai", "o3", timings=Timings(start=datetime(2025, 7, 1, tzinfo=UTC).timestamp())
    )
    old, new = pricer.price(before), pricer.price(after)
    assert old is not None and new is not None and new.total < old.total


def test_pricing_needs_no_network() -> None:
    code = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise AssertionError("network used")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from brownout.core.cost import Pricer
        from brownout.core.exchange import Exchange, Usage

        pricer = Pricer()
        pricer.warm()
        ex = Exchange(id="e", session="s", host="api.openai.com", scheme="https", provider="openai",
                      operation="chat", model="gpt-4o-mini", usage=Usage(1000, 1000))
        print(pricer.price(ex).total)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) > 0


def priced(model: str, provider_id: str, **tokens: int) -> float:
    when = datetime.fromtimestamp(T, UTC)
    return float(
        calc_price(PriceUsage(**tokens), model, genai_request_timestamp=when, provider_id=provider_id).total_price
    )


@pytest.mark.parametrize(
    ("host", "provider", "model", "table_provider", "read", "write"),
    [
        ("api.openai.com", "openai", "gpt-4o-mini", "openai", 8_000, None),
        ("api.anthropic.com", "anthropic", "claude-sonnet-4-5", "anthropic", 6_000, 4_000),
        ("generativelanguage.googleapis.com", "gemini", "gemini-2.5-flash", "google", 8_000, None),
    ],
)
def test_cached_prompt_tokens_are_priced_at_the_cache_rates(
    host: str, provider: str, model: str, table_provider: str, read: int, write: int | None
) -> None:
    usage = Usage(12_000, 3_000, cache_read_tokens=read, cache_write_tokens=write)
    cost = Pricer().price(exchange(host, provider, model, usage=usage))
    assert cost is not None
    tokens = {
        "input_tokens": 12_000,
        "output_tokens": 3_000,
        "cache_read_tokens": read,
        "cache_write_tokens": write or 0,
    }
    assert cost.total == pytest.approx(priced(model, table_provider, **tokens))
    uncached = priced(model, table_provider, input_tokens=12_000, output_tokens=3_000)
    reads_only = priced(model, table_provider, input_tokens=12_000, output_tokens=3_000, cache_read_tokens=read)
    assert reads_only < uncached  # a cache read costs a fraction of an input token
    if write:
        assert cost.total > reads_only  # an Anthropic cache write costs more than an input token


def test_cache_counts_beyond_the_input_are_capped_not_unpriced() -> None:
    # The table refuses cache counts above the input; a provider's or proxy's bad count still gets a price.
    usage = Usage(1_000, 10, cache_read_tokens=5_000, cache_write_tokens=400)
    cost = Pricer().price(exchange("api.anthropic.com", "anthropic", "claude-sonnet-4-5", usage=usage))
    assert cost is not None
    assert cost.total == pytest.approx(
        priced("claude-sonnet-4-5", "anthropic", input_tokens=1_000, output_tokens=10, cache_read_tokens=1_000)
    )


def test_an_anthropic_answer_with_a_cached_prompt_costs_what_the_table_says() -> None:
    # From the wire: Anthropic's input_tokens leaves the cache out, the price table counts it in.
    from tests.wire._wire_helpers import request

    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
    fmt, ex = request("/v1/messages", body, host="api.anthropic.com")
    ex.scheme, ex.timings = "https", Timings(start=T)
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Hello"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 50,
            "cache_creation_input_tokens": 2_000,
            "cache_creation": {"ephemeral_5m_input_tokens": 1_500, "ephemeral_1h_input_tokens": 500},
            "cache_read_input_tokens": 10_000,
            "output_tokens": 20,
        },
    }
    fmt.parse_response(ex, json.dumps(answer).encode())
    cost = Pricer().price(ex)
    assert cost is not None
    cached = {"input_tokens": 12_050, "output_tokens": 20, "cache_read_tokens": 10_000, "cache_write_tokens": 2_000}
    reference = priced("claude-sonnet-4-5", "anthropic", **cached, cache_write_1h_tokens=500)
    assert cost.total == pytest.approx(reference)
    five_minutes = priced("claude-sonnet-4-5", "anthropic", **cached)
    assert cost.total > five_minutes  # an hour's cache write costs more than five minutes'

    assert cost.total < priced("claude-sonnet-4-5", "anthropic", input_tokens=12_050, output_tokens=20)
