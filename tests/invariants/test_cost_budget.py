from __future__ import annotations

import pytest
from genai_prices import Usage, calc_price
from pydantic import ValidationError

from brownout.core.cost import Pricer
from brownout.core.exchange import Exchange
from brownout.invariants.config import parse_invariants
from tests.invariants.builders import Harness, llm

PRICER = Pricer()


def priced(ex: Exchange) -> Exchange:
    """What the proxy's pipeline does before invariants run."""
    ex.cost = PRICER.price(ex)
    return ex


def list_price(input_tokens: int, output_tokens: int) -> float:
    """gpt-4o at the builders' date, straight from the price table."""
    calc = calc_price(Usage(input_tokens=input_tokens, output_tokens=output_tokens), "gpt-4o", provider_id="openai")
    return float(calc.total_price)


def test_a_session_over_budget_is_flagged_once_with_its_cost() -> None:
    budget = list_price(100_000, 10_000) * 1.5  # two such calls go over, one does not
    h = Harness([{"type": "cost_budget", "max_session_usd": budget}])
    assert h.run(priced(llm(0, usage=(100_000, 10_000)))) == []
    (v,) = h.run(priced(llm(2, usage=(100_000, 10_000))))
    assert v.details["cost_usd"] == pytest.approx(2 * list_price(100_000, 10_000))
    assert v.details["scope"] == "session" and "over 2 LLM calls" in v.message and "USD" in v.message
    assert h.run(priced(llm(4, usage=(100_000, 10_000)))) == []  # once per session


def test_gpt4o_is_priced_at_its_list_price() -> None:
    # $2.50 per million input tokens and $10 per million output tokens (OpenAI's list price in 2025).
    assert priced(llm(0, usage=(1_000_000, 100_000))).cost.total == pytest.approx(3.5)


def test_one_expensive_call() -> None:
    h = Harness([{"type": "cost_budget", "max_exchange_usd": 0.05}])
    assert h.run(priced(llm(0, usage=(1000, 100)))) == []
    (v,) = h.run(priced(llm(1, usage=(20_000, 1000))))
    assert v.details["scope"] == "exchange" and v.details["cost_usd"] == pytest.approx(list_price(20_000, 1000))
    assert "budget $0.05 per call" in v.message
    assert len(h.run(priced(llm(2, usage=(20_000, 1000))))) == 1  # every such call


def test_unpriced_calls_are_counted_not_guessed() -> None:
    h = Harness([{"type": "cost_budget", "max_session_usd": 0.001}])
    mystery = priced(llm(0, usage=(10_000_000, 0), model="in-house-model", response_model=None))
    assert mystery.cost is None and h.run(mystery) == []
    (v,) = h.run(priced(llm(1, usage=(10_000, 1000))))
    assert v.details["unpriced_calls"] == 1 and "1 LLM call could not be priced" in v.message


def test_needs_a_limit() -> None:
    with pytest.raises(ValidationError, match="max_session_usd and/or max_exchange_usd"):
        parse_invariants([{"type": "cost_budget"}])
    with pytest.raises(ValidationError):
        parse_invariants([{"type": "cost_budget", "max_session_usd": 0}])
