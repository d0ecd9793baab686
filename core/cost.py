"""Cost per exchange in currency, from pydantic's maintained price table (the `genai-prices` package).

The table ships inside the package, so pricing needs no network; its prices carry dates, so an
exchange is priced at the prices in force when it started (a replayed recording keeps its cost).
The provider is found from the upstream's URL first (api.openai.com, api.groq.com, an Azure
endpoint, ...), then from the wire format (a gateway, a proxy or a mock speaking OpenAI's format
is priced as OpenAI). A model the table does not know, and local runtimes such as Ollama, stay
unpriced (`cost` None) rather than guessed. Prompt tokens read from or written to the provider's
cache are priced at the table's cache rates where it has them (a cache read costs a fraction of an
input token, an Anthropic cache write more than one, and more again when kept an hour).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from brownout.core.exchange import Cost, Exchange, Usage
from brownout.core.span_attributes import LLM_OPERATIONS, operation_name

__all__ = ["CURRENCY", "Pricer", "price_table_version"]

log = logging.getLogger(__name__)

CURRENCY = "USD"  # every price in genai-prices is in US dollars
# Wire format -> the table's provider id, for upstreams whose URL the table does not recognise.
_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google", "bedrock": "aws"}
_CACHE_MAX = 4096


def _prices() -> Any:
    # Imported on first use, not at module import: the table is a 1.6 MB module that takes about half
    # a second to load, which every CLI command would otherwise pay. Pricer.warm() loads it at start.
    import genai_prices

    return genai_prices


def price_table_version() -> str:
    """The genai-prices release whose table prices exchanges."""
    return str(_prices().__version__)


class Pricer:
    """Prices finished exchanges; remembers per upstream and model how to look them up (or that it cannot)."""

    def __init__(self) -> None:
        # (scheme, host, wire provider, model) -> lookup keywords for calc_price, or None: not priced
        self._how: dict[tuple[str, str, str, str], dict[str, str] | None] = {}

    def warm(self) -> None:
        """Load the price table now, so the first exchange does not wait for it."""
        prices = _prices()
        prices.calc_price(prices.Usage(input_tokens=1, output_tokens=1), "gpt-4o", provider_id="openai")

    def price(self, exchange: Exchange) -> Cost | None:
        """The exchange's cost, or None when it reported no tokens or its model is not in the table."""
        usage = exchange.usage
        if operation_name(exchange) not in LLM_OPERATIONS or (
            usage.input_tokens is None and usage.output_tokens is None
        ):
            return None
        prices = _prices()
        tokens = _tokens(prices, usage)
        when = datetime.fromtimestamp(exchange.timings.start, UTC) if exchange.timings.start else None
        for model in dict.fromkeys(m for m in (exchange.response_model, exchange.model) if m):
            key = (exchange.scheme, exchange.host, exchange.provider, model)
            if key not in self._how:
                self._remember(key, self._lookup(prices, tokens, model, exchange, when))
            how = self._how[key]
            if how is None:
                continue
            calc = prices.calc_price(tokens, model, genai_request_timestamp=when, **how)
            return Cost(
                total=float(calc.total_price),
                input=float(calc.input_price),
                output=float(calc.output_price),
                currency=CURRENCY,
                model=str(calc.model.id),
                provider=str(calc.provider.id),
            )
        return None

    @staticmethod
    def _lookup(
        prices: Any, tokens: Any, model: str, exchange: Exchange, when: datetime | None
    ) -> dict[str, str] | None:
        candidates: list[dict[str, str]] = [{"provider_api_url": f"{exchange.scheme}://{exchange.host}"}]
        if exchange.provider in _PROVIDER_IDS:
            candidates.append({"provider_id": _PROVIDER_IDS[exchange.provider]})
        for how in candidates:
            try:
                prices.calc_price(tokens, model, genai_request_timestamp=when, **how)
            except LookupError:
                continue
            return how
        log.debug("no price for model %r at %s (%s)", model, exchange.host, exchange.provider)
        return None

    def _remember(self, key: tuple[str, str, str, str], how: dict[str, str] | None) -> None:
        if len(self._how) >= _CACHE_MAX:  # model names come from traffic: keep the memory bounded
            self._how.clear()
        self._how[key] = how


def _tokens(prices: Any, usage: Usage) -> Any:
    """The table's usage: the prompt's cache reads and writes apart, so each is priced at its own rate.

    Both are parts of `input_tokens`; counts that claim more than the whole (a provider's or a proxy's
    bug) are capped to it, since the table refuses them and the call would go unpriced.
    """
    inp = usage.input_tokens or 0
    read = min(usage.cache_read_tokens or 0, inp)
    write = min(usage.cache_write_tokens or 0, inp - read)
    return prices.Usage(
        input_tokens=inp,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=read,
        cache_write_tokens=write,
        cache_write_1h_tokens=min(usage.cache_write_1h_tokens or 0, write),
    )
