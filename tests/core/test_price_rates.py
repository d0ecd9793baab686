"""Pricing from a price set's rates gives the table's own prices, band by band, and knows when it cannot."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices import data_snapshot

from brownout.core.cost import Pricer
from brownout.core.exchange import Exchange, Timings, Usage
from brownout.core.price_rates import Counts, RateTable

DATES = [datetime(2024, 9, 1, tzinfo=UTC), datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC)]
# (input, output, cache read, cache write, of which kept 1 h): small, mid, either side of the common
# 128k / 200k / 272k tiers, and past a million.
USAGES = [
    (12, 3, 0, 0, 0),
    (12_000, 3_000, 8_000, 0, 0),
    (12_000, 3_000, 6_000, 4_000, 1_000),
    (128_000, 10, 0, 0, 0),
    (128_001, 10, 100_000, 0, 0),
    (200_000, 500, 0, 150_000, 150_000),
    (200_001, 500, 1_000, 150_000, 50_000),
    (272_001, 0, 0, 0, 0),
    (1_100_000, 40_000, 500_000, 100_000, 0),
]


def exchange(model: str, provider: str, host: str, usage: Usage, when: datetime) -> Exchange:
    return Exchange(
        id="e",
        session="s",
        scheme="https",
        host=host,
        provider=provider,
        operation="chat",
        model=model,
        usage=usage,
        timings=Timings(start=when.timestamp()),
    )


def table_price(model: str, provider_id: str, usage: Usage, when: datetime) -> float | None:
    counts = Counts.of(usage)
    try:
        calc = genai_prices.calc_price(
            counts.usage(genai_prices), model, provider_id=provider_id, genai_request_timestamp=when
        )
    except LookupError:
        return None
    return float(calc.total_price)


MODELS = [
    (m.id, p.id)
    for p in data_snapshot.get_snapshot().providers
    if p.id in ("openai", "anthropic", "google")
    for m in p.models
]


@pytest.mark.parametrize(("provider_id", "wire", "host"), [
    ("openai", "openai", "api.openai.com"),
    ("anthropic", "anthropic", "api.anthropic.com"),
    ("google", "gemini", "generativelanguage.googleapis.com"),
])  # fmt: skip
def test_every_model_is_priced_as_the_table_prices_it(provider_id: str, wire: str, host: str) -> None:
    pricer = Pricer()  # one pricer: after an exchange has read a price set's rates, the next use them
    compared = 0
    for model, owner in MODELS:
        if owner != provider_id:
            continue
        for when, row in itertools.product(DATES, USAGES * 2):
            usage = Usage(row[0], row[1], cache_read_tokens=row[2], cache_write_tokens=row[3])
            usage.cache_write_1h_tokens = row[4]
            expected = table_price(model, provider_id, usage, when)
            cost = pricer.price(exchange(model, wire, host, usage, when))
            if expected is None:
                continue  # not in the table at that date: the pricer may find it another way
            assert cost is not None, (model, when, row)
            assert cost.total == pytest.approx(expected, rel=1e-12, abs=1e-15), (model, when, row)
            compared += 1
    assert compared > 100


def test_the_table_prices_only_what_rates_cannot_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = genai_prices.calc_price

    def counting(usage: Any, model: str, **kw: Any) -> Any:
        calls.append(model)
        return real(usage, model, **kw)

    monkeypatch.setattr(genai_prices, "calc_price", counting)
    pricer = Pricer()
    when = DATES[1]

    def price(model: str, provider: str, host: str, inp: int, out: int) -> None:
        assert pricer.price(exchange(model, provider, host, Usage(inp, out), when)) is not None

    price("gpt-4o-mini", "openai", "api.openai.com", 1_000, 10)  # looked up, priced by the table
    looked_up = len(calls)
    for n in range(20):
        price("gpt-4o-mini", "openai", "api.openai.com", 1_000 + n * 977, 10 + n)
    assert len(calls) == looked_up  # plain rates: never the table again
    # A tiered price set (Anthropic's long-context rates): each band is read once.
    price("claude-sonnet-4-5", "anthropic", "api.anthropic.com", 5_000, 100)
    after_first = len(calls)
    price("claude-sonnet-4-5", "anthropic", "api.anthropic.com", 150_000, 100)
    assert len(calls) == after_first
    price("claude-sonnet-4-5", "anthropic", "api.anthropic.com", 250_000, 100)  # past the 200k tier
    assert len(calls) == after_first + 1
    price("claude-sonnet-4-5", "anthropic", "api.anthropic.com", 400_000, 100)
    assert len(calls) == after_first + 1


class _Squared:
    """A price set whose price is not linear in tokens: rates read from it must not be trusted."""

    def __init__(self) -> None:
        self.input_mtok = Decimal(1)

    def calc_price(self, usage: Any) -> dict[str, Decimal]:
        price = Decimal(usage.input_tokens) ** 2 / 10**6
        return {"input_price": price, "output_price": Decimal(0), "total_price": price}


def test_rates_that_the_table_contradicts_are_not_used() -> None:
    table = RateTable.of(genai_prices, _Squared())
    assert table is not None
    counts = Counts(3, 0)
    table.learn(genai_prices, counts, (Decimal(9) / 10**6, Decimal(0), Decimal(9) / 10**6))
    assert table.price(counts) is None and table.price(Counts(500, 0)) is None


def test_a_price_set_holding_anything_but_rates_and_tiers_has_no_table() -> None:
    odd = _Squared()
    odd.input_mtok = "1.0"  # type: ignore[assignment]
    assert RateTable.of(genai_prices, odd) is None
