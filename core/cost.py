"""Cost per exchange in currency, from pydantic's maintained price table (the `genai-prices` package).

The table ships inside the package, so pricing needs no network; its prices carry dates, so an
exchange is priced at the prices in force when it started (a replayed recording keeps its cost).
The provider is found from the upstream's URL first (api.openai.com, api.groq.com, an Azure
endpoint, ...), then from the wire format (a gateway, a proxy or a mock speaking OpenAI's format
is priced as OpenAI). A model the table does not know, and local runtimes such as Ollama, stay
unpriced (`cost` None) rather than guessed. Prompt tokens read from or written to the provider's
cache are priced at the table's cache rates where it has them (a cache read costs a fraction of an
input token, an Anthropic cache write more than one, and more again when kept an hour). Once a
price set has priced an exchange, the next ones are priced from its rates (brownout.core.price_rates):
the same prices, without the table's per-call cost.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from brownout.core.exchange import Cost, Exchange
from brownout.core.price_rates import Amounts, Counts, RateTable
from brownout.core.span_attributes import LLM_OPERATIONS, operation_name

__all__ = ["CURRENCY", "Pricer", "price_table_version"]

log = logging.getLogger(__name__)

CURRENCY = "USD"  # every price in genai-prices is in US dollars
# Wire format -> the table's provider id, for upstreams whose URL the table does not recognise.
_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google"}
_CACHE_MAX = 4096
_UNSEEN = object()


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
        # ... -> the table's model and provider it was priced as
        self._found: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}
        # id(price set) -> its rates, or None: priced by the table (the table keeps the price set alive)
        self._rates: dict[int, RateTable | None] = {}

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
        counts = Counts.of(usage)
        when = datetime.fromtimestamp(exchange.timings.start, UTC) if exchange.timings.start else None
        for model in dict.fromkeys(m for m in (exchange.response_model, exchange.model) if m):
            key = (exchange.scheme, exchange.host, exchange.provider, model)
            if key not in self._how:
                self._remember(key, self._lookup(prices, counts.usage(prices), model, exchange, when))
            how = self._how[key]
            if how is None:
                continue
            found = self._found.get(key)
            if found is not None:
                info, provider = found
                table = self._rates.get(id(price_set := info.get_prices(when or datetime.now(UTC))))
                amounts = table.price(counts) if table is not None and table.price_set is price_set else None
                if amounts is not None:
                    return _cost(amounts, info, provider)
            calc = prices.calc_price(counts.usage(prices), model, genai_request_timestamp=when, **how)
            amounts = (calc.input_price, calc.output_price, calc.total_price)
            self._learn(prices, key, calc, counts, amounts)
            return _cost(amounts, calc.model, calc.provider)
        return None

    def _learn(self, prices: Any, key: tuple[str, str, str, str], calc: Any, counts: Counts, priced: Amounts) -> None:
        """Remember what the table priced `key` as, and read the rates of the price set it used."""
        if len(self._found) >= _CACHE_MAX:
            self._found.clear()
        self._found[key] = (calc.model, calc.provider)
        price_set = calc.model_price
        table = self._rates.get(id(price_set), _UNSEEN)
        # A None entry (always the table) is right whatever price set reuses its id; a table is not.
        if table is _UNSEEN or (isinstance(table, RateTable) and table.price_set is not price_set):
            if len(self._rates) >= _CACHE_MAX:
                self._rates.clear()
            table = self._rates[id(price_set)] = RateTable.of(prices, price_set)
        if isinstance(table, RateTable):
            table.learn(prices, counts, priced)

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


def _cost(amounts: Amounts, model: Any, provider: Any) -> Cost:
    inp, out, total = amounts
    return Cost(
        total=float(total),
        input=float(inp),
        output=float(out),
        currency=CURRENCY,
        model=str(model.id),
        provider=str(provider.id),
    )
